package app

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestLimiterForgetsIdleKeysAndStaysBounded: a bucket idle long enough to be full again is
// dropped, and the map never outgrows maxLimiterKeys.
func TestLimiterForgetsIdleKeysAndStaysBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	l := newLimiter("buyer", RateLimit{Rate: 5, Burst: 10}) // full again 2 s after its last use
	for i := range 1000 {
		l.reserve(fmt.Sprint("u", i), t0)
	}
	assert.Equal(t, 1000, l.size())
	l.reserve("u0", t0.Add(time.Second))
	assert.Equal(t, 1000, l.size(), "none idle long enough yet")
	l.reserve("late", t0.Add(2500*time.Millisecond))
	assert.Equal(t, 2, l.size(), "u0, used a second later, and the new key")

	for i := range maxLimiterKeys + 10 {
		l.reserve(fmt.Sprint("bot", i), t0.Add(3*time.Second))
	}
	assert.LessOrEqual(t, l.size(), maxLimiterKeys, "bounded even when every key is active")
	assert.Nil(t, newLimiter("sku", RateLimit{}), "a zero rate is no limit")
}
