package app

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrRateLimited is returned (as a *RateLimitError) by PlaceOrder when the buyer, or a SKU of
// the order, places orders faster than Policy allows; nothing is stored.
var ErrRateLimited = errors.New("rate limited")

// RateLimit is a token bucket: Rate orders per second on average, Burst at once (at least 1).
// A zero Rate is no limit.
type RateLimit struct {
	Rate  float64
	Burst int
}

// RateLimitError says who was limited and when to try again.
type RateLimitError struct {
	Key        string // "buyer u1", "sku CUP-1"
	Limit      RateLimit
	RetryAfter time.Duration // when the order would have been admitted
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%s: %s places orders faster than %g/s (burst %d); retry in %s",
		ErrRateLimited, e.Key, e.Limit.Rate, e.Limit.Burst, e.RetryAfter.Round(time.Millisecond))
}

// Unwrap makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// RetryAfterSeconds is RetryAfter for the Retry-After header: whole seconds, at least 1.
func (e *RateLimitError) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// maxLimiterKeys bounds the buckets one limiter keeps. Past it even active keys are
// forgotten, and each of them gets a fresh burst: a small leak, for bounded memory.
const maxLimiterKeys = 100_000

// limiter keeps one golang.org/x/time/rate bucket per key (a buyer, a SKU) in this process. A
// bucket idle long enough to have refilled is the same as a new one, so such keys are
// dropped: the map holds only the keys active in the last few seconds.
type limiter struct {
	what  string
	limit RateLimit
	idle  time.Duration // time for an empty bucket to fill up

	mu    sync.Mutex
	keys  map[string]*bucket
	swept time.Time
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// newLimiter returns the limiter of l for keys naming a what; nil when l sets no limit.
func newLimiter(what string, l RateLimit) *limiter {
	if l.Rate <= 0 {
		return nil
	}
	l.Burst = max(l.Burst, 1)
	idle := time.Duration(float64(l.Burst) / l.Rate * float64(time.Second))
	return &limiter{what: what, limit: l, idle: max(idle, time.Second), keys: map[string]*bucket{}}
}

// reserve takes one token of key's bucket at now; the caller cancels it when the order is
// not admitted after all.
func (l *limiter) reserve(key string, now time.Time) *rate.Reservation {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) >= l.idle || len(l.keys) >= maxLimiterKeys {
		l.sweep(now)
	}
	b := l.keys[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.limit.Rate), l.limit.Burst)}
		l.keys[key] = b
	}
	b.last = now
	return b.lim.ReserveN(now, 1)
}

// sweep drops the buckets idle long enough to be full, and, while there are still too many,
// any (down to nine tenths of the bound, so the next insert does not sweep again).
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.keys {
		if now.Sub(b.last) >= l.idle {
			delete(l.keys, k)
		}
	}
	for k := range l.keys {
		if len(l.keys) < maxLimiterKeys*9/10 {
			break
		}
		delete(l.keys, k)
	}
	l.swept = now
}

// size is how many keys the limiter holds.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// admit takes one token from the buyer's bucket and from each SKU's, all or none: when any of
// them is empty, every token taken is given back and a *RateLimitError names the bucket that
// would have made the order wait longest.
func (s *Service) admit(buyerID string, skus []string) error {
	if s.perBuyer == nil && s.perSKU == nil {
		return nil
	}
	now := s.now()
	var (
		taken []*rate.Reservation
		worst *RateLimitError
	)
	take := func(l *limiter, key string) {
		if l == nil {
			return
		}
		r := l.reserve(key, now)
		taken = append(taken, r)
		wait := r.DelayFrom(now)
		if !r.OK() {
			wait = time.Second // cannot happen with a burst of at least 1
		}
		if wait > 0 && (worst == nil || wait > worst.RetryAfter) {
			worst = &RateLimitError{Key: l.what + " " + key, Limit: l.limit, RetryAfter: wait}
		}
	}
	take(s.perBuyer, buyerID)
	for _, sku := range skus {
		take(s.perSKU, sku)
	}
	if worst == nil {
		return nil
	}
	for _, r := range taken {
		r.CancelAt(now)
	}
	return worst
}
