package compare

import (
	"sync"
	"time"
)

// truth is what really happened to the units, from the buyers' side, whatever a design's
// books say: who held a unit from when to when, who paid, and when a buyer was turned away.
// A unit is really free at t when fewer than Units buyers own one then: a buyer owns a unit
// from the moment they asked for it (before the design decided) until its deadline, and
// for good once they paid. An unpaid buyer past the deadline has walked away: the cup is
// back on the shelf, whatever the design's books say.
type truth struct {
	units int64

	mu       sync.Mutex
	holds    []hold
	refusals []time.Time
}

// hold is a buyer who got a unit.
type hold struct {
	wave     int
	asked    time.Time // the buyer asked for it (the design took it after)
	deadline time.Time // to pay
	paid     bool
}

func (t *truth) held(h hold) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.holds = append(t.holds, h)
}

func (t *truth) refused(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refusals = append(t.refusals, at)
}

// owned is how many units buyers own at at.
func (t *truth) owned(at time.Time) int64 {
	var n int64
	for _, h := range t.holds {
		if !h.asked.After(at) && (h.paid || h.deadline.After(at)) {
			n++
		}
	}
	return n
}

// lastDeadline is the latest deadline of a hold of wave (zero time: none).
func (t *truth) lastDeadline(wave int) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for _, h := range t.holds {
		if h.wave == wave && h.deadline.After(last) {
			last = h.deadline
		}
	}
	return last
}

// tally is the buyers' side of a design's result.
type tally struct {
	holds, paid, unpaid, secondWavePaid int64
	refused, refusedWhileFree           int64
}

func (t *truth) tally() tally {
	t.mu.Lock()
	defer t.mu.Unlock()
	var r tally
	for _, h := range t.holds {
		r.holds++
		switch {
		case h.paid && h.wave == 2:
			r.paid++
			r.secondWavePaid++
		case h.paid:
			r.paid++
		default:
			r.unpaid++
		}
	}
	for _, at := range t.refusals {
		r.refused++
		if t.owned(at) < t.units {
			r.refusedWhileFree++
		}
	}
	return r
}
