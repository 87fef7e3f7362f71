// Package live keeps the water level of the SKUs someone is watching: one reader per SKU polls
// the stock figures at a fixed interval and fans each sample out to every watcher, so a hundred
// open browsers cost stock one read a second per SKU, not a hundred.
package live

import (
	"context"
	"sync"
	"time"
)

// Sample is a SKU's figures at one moment, as the stock API answered them.
type Sample struct {
	At        time.Time `json:"at"`
	OnHand    int64     `json:"on_hand"`
	Available int64     `json:"available"`
	Locked    int64     `json:"locked"`
	Sold      int64     `json:"sold"`
	Incoming  int64     `json:"incoming"`
	Error     string    `json:"error,omitempty"` // the read failed; the figures are empty
}

// Fetch reads a SKU's figures with a watcher's credential (the bearer token it signed in with).
type Fetch func(ctx context.Context, sku, credential string) (Sample, error)

// Hub runs one poller per watched SKU. The zero value is not usable: use New.
type Hub struct {
	fetch    Fetch
	interval time.Duration

	mu     sync.Mutex
	feeds  map[string]*feed
	joined uint64 // watchers so far: a watcher's number orders it among its SKU's others
}

type feed struct {
	watchers map[*Watcher]struct{}
	stop     context.CancelFunc
}

// Watcher receives one SKU's samples on C until it is closed by Leave. A watcher that does not
// keep up misses samples rather than slowing the others.
type Watcher struct {
	C          chan Sample
	sku        string
	credential string
	joined     uint64 // the hub's count when it joined: higher is newer, never a tie
}

// New is a hub reading through fetch every interval.
func New(fetch Fetch, interval time.Duration) *Hub {
	return &Hub{fetch: fetch, interval: interval, feeds: map[string]*feed{}}
}

// Watch adds a watcher of sku; the first watcher of a SKU starts its poller. credential is the
// watcher's own token: the poller reads with the newest watcher's, so a watcher that leaves
// takes its token with it.
func (h *Hub) Watch(sku, credential string) *Watcher {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.joined++
	w := &Watcher{C: make(chan Sample, 16), sku: sku, credential: credential, joined: h.joined}
	f := h.feeds[sku]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &feed{watchers: map[*Watcher]struct{}{}, stop: cancel}
		h.feeds[sku] = f
		go h.poll(ctx, sku)
	}
	f.watchers[w] = struct{}{}
	return w
}

// Leave removes w and closes its channel; the last watcher of a SKU stops its poller.
func (h *Hub) Leave(w *Watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[w.sku]
	if f == nil {
		return
	}
	if _, ok := f.watchers[w]; !ok {
		return
	}
	delete(f.watchers, w)
	close(w.C)
	if len(f.watchers) == 0 {
		f.stop()
		delete(h.feeds, w.sku)
	}
}

// Pollers is how many SKUs are polled now.
func (h *Hub) Pollers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.feeds)
}

func (h *Hub) poll(ctx context.Context, sku string) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		cred, ok := h.credential(sku)
		if !ok {
			return
		}
		s, err := h.fetch(ctx, sku, cred)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s = Sample{Error: err.Error()}
		}
		s.At = time.Now()
		h.broadcast(sku, s)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// credential is the newest watcher's token; false when nobody watches sku any more.
func (h *Hub) credential(sku string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[sku]
	if f == nil || len(f.watchers) == 0 {
		return "", false
	}
	var newest *Watcher
	for w := range f.watchers {
		if newest == nil || w.joined > newest.joined {
			newest = w
		}
	}
	return newest.credential, true
}

func (h *Hub) broadcast(sku string, s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feeds[sku]
	if f == nil {
		return
	}
	for w := range f.watchers {
		select {
		case w.C <- s:
		default: // a slow watcher misses this sample
		}
	}
}

// Read is one read of sku with credential, outside any poller: a new watcher's check that its
// own token may read the SKU before it joins.
func (h *Hub) Read(ctx context.Context, sku, credential string) (Sample, error) {
	return h.fetch(ctx, sku, credential)
}
