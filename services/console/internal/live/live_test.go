package live

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOnePollPerSKUHoweverManyWatch: ten watchers of one SKU and one of another cost two
// readers; every watcher gets samples; the pollers stop when the last watcher leaves.
func TestOnePollPerSKUHoweverManyWatch(t *testing.T) {
	var mu sync.Mutex
	reads := map[string]int{}
	var inFlight, maxInFlight atomic.Int32
	fetch := func(_ context.Context, sku, cred string) (Sample, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		reads[sku]++
		mu.Unlock()
		return Sample{Available: 7, Sold: 3}, nil
	}
	h := New(fetch, 20*time.Millisecond)
	var ws []*Watcher
	for range 10 {
		ws = append(ws, h.Watch("CUP-1", "tok"))
	}
	other := h.Watch("MUG-2", "tok")
	if got := h.Pollers(); got != 2 {
		t.Fatalf("pollers = %d, want 2", got)
	}
	for _, w := range append(ws, other) {
		select {
		case s := <-w.C:
			if s.Available != 7 || s.Sold != 3 || s.At.IsZero() {
				t.Fatalf("sample %+v", s)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("a watcher got no sample")
		}
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	cup, mug := reads["CUP-1"], reads["MUG-2"]
	mu.Unlock()
	// ~10 reads each in 200 ms at 20 ms; ten watchers would make it ~100 if each polled.
	if cup > 20 || mug > 20 || cup == 0 {
		t.Fatalf("reads CUP-1 %d, MUG-2 %d: want one poller per SKU", cup, mug)
	}
	for _, w := range ws {
		h.Leave(w)
	}
	h.Leave(other)
	h.Leave(other) // twice is harmless
	if got := h.Pollers(); got != 0 {
		t.Fatalf("pollers after everyone left = %d", got)
	}
}

// TestTheNewestWatchersTokenReads: the poller reads with the token of the newest watcher still
// there, so the one who left takes theirs along.
func TestTheNewestWatchersTokenReads(t *testing.T) {
	used := make(chan string, 100)
	h := New(func(_ context.Context, _, cred string) (Sample, error) {
		used <- cred
		return Sample{}, nil
	}, 10*time.Millisecond)
	a := h.Watch("CUP-1", "alice")
	b := h.Watch("CUP-1", "bob")
	h.Leave(b)
	deadline := time.After(2 * time.Second)
	for {
		select {
		case cred := <-used:
			if cred == "alice" {
				h.Leave(a)
				return
			}
		case <-deadline:
			t.Fatal("never read with alice's token after bob left")
		}
	}
}
