package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stockflow/stockflow/pkg/gate"
)

// WithSoldOutTTL makes the service remember for ttl that the gate answered sold_out for a
// SKU, and answer ErrSoldOut from that memory (KnownSoldOut, and PlaceOrder when Redis does
// not answer) without asking again; 0, the default: every attempt asks the gate.
//
// Remembering is safe because the gate only ever turns buyers away: a unit given back
// (a rejected lock, a release, a refund) during the window reaches the next buyer at most ttl
// late, and the database still decides every order that passes, so nothing is oversold.
func WithSoldOutTTL(ttl time.Duration) Option {
	return func(s *Service) { s.soldOut = newSoldOutCache(ttl, time.Now) }
}

// soldOutCache is this process's memory of the gate's recent sold_out answers: per SKU the
// smallest quantity the gate refused (it had less than that left) and until when that is
// believed. It holds only SKUs that sold out moments ago, so it stays a handful of entries.
//
// Its clock is time.Now, never the service clock: ttl is a local duration, and the service
// clock may be stopped (tests) or shifted (CLOCK_OFFSET).
type soldOutCache struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.RWMutex
	skus map[string]soldOutEntry
}

type soldOutEntry struct {
	qty   int64 // the gate had less than qty left
	until time.Time
}

func newSoldOutCache(ttl time.Duration, now func() time.Time) *soldOutCache {
	if ttl <= 0 {
		return nil
	}
	return &soldOutCache{ttl: ttl, now: now, skus: map[string]soldOutEntry{}}
}

// remember records that the gate had less than qty of sku left. A weaker claim (a larger
// qty) does not replace a stronger one still believed.
func (c *soldOutCache) remember(sku string, qty int64) {
	if c == nil || sku == "" {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.skus {
		if !now.Before(e.until) {
			delete(c.skus, k)
		}
	}
	if e, ok := c.skus[sku]; ok && e.qty < qty {
		return
	}
	c.skus[sku] = soldOutEntry{qty: qty, until: now.Add(c.ttl)}
}

// any reports whether some SKU is believed sold out now.
func (c *soldOutCache) any() bool {
	if c == nil {
		return false
	}
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range c.skus {
		if now.Before(e.until) {
			return true
		}
	}
	return false
}

// lookup returns the first of lines' SKUs believed to have less left than its line asks.
func (c *soldOutCache) lookup(lines []gate.Line) (sku string, ok bool) {
	if c == nil {
		return "", false
	}
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, l := range lines {
		if e, found := c.skus[l.SKU]; found && l.Qty >= e.qty && now.Before(e.until) {
			return l.SKU, true
		}
	}
	return "", false
}

// forget drops every entry: units came back to the gate through this process.
func (c *soldOutCache) forget() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.skus)
}

// MaybeSoldOut reports whether the service remembers any SKU sold out (WithSoldOutTTL) right
// now: when it does not, KnownSoldOut would answer nil for any request, so a caller need not
// read one.
func (s *Service) MaybeSoldOut() bool { return s.soldOut.any() }

// KnownSoldOut returns ErrSoldOut, naming the SKU, when one of items' SKUs was answered
// sold_out by the gate within the last WithSoldOutTTL (for a quantity no larger than its
// line's), and nil otherwise. It reads only this process's memory and stores nothing: the
// public API asks it before anything else of an order placement (httpapi), so a storm's
// losers cost neither a token check, a price quote nor a Redis call.
func (s *Service) KnownSoldOut(ctx context.Context, items []ItemRequest) error {
	if s.soldOut == nil {
		return nil
	}
	sku, ok := s.soldOut.lookup(gateLines(items))
	if !ok {
		return nil
	}
	s.rec.soldOutCached(ctx)
	return fmt.Errorf("%w: %s", ErrSoldOut, sku)
}

func gateLines(items []ItemRequest) []gate.Line {
	lines := make([]gate.Line, len(items))
	for i, it := range items {
		lines[i] = gate.Line{SKU: it.SKU, Qty: it.Qty}
	}
	return lines
}
