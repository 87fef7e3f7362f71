package loadtest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/tools/flashsale"
)

func TestPercentileCountsUnfinishedOrdersAsSlowest(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		beyond int
		p      float64
		want   time.Duration
	}{
		{"none", nil, 0, 0.99, 0},
		{"one", ms(7), 0, 0.5, 7 * time.Millisecond},
		{"median of four is the second (nearest rank)", ms(1, 2, 3, 4), 0, 0.5, 2 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 0, 0.99, 99 * time.Millisecond},
		{"p99 with one of 101 unfinished is still measured", ms(hundred...), 1, 0.99, 100 * time.Millisecond},
		{"p99 with two of 100 unfinished is beyond the grace", ms(hundred[:98]...), 2, 0.99, -1},
		{"all unfinished", nil, 3, 0.5, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, percentile(tc.sorted, tc.beyond, tc.p))
		})
	}
}

func order(id, status string, history ...any) listedOrder {
	o := listedOrder{OrderID: id, Status: status}
	for i := 0; i < len(history); i += 2 {
		o.History = append(o.History, struct {
			Status string    `json:"status"`
			At     time.Time `json:"at"`
		}{history[i].(string), history[i+1].(time.Time)})
	}
	return o
}

func TestTallyJoinsAcceptedAndListedOrders(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	accepted := map[string]time.Time{"a": t0, "b": t0, "c": t0, "d": t0, "lost": t0}
	listed := []listedOrder{
		order("a", "awaiting_payment", "pending", at(5), "awaiting_payment", at(40)),
		order("b", "awaiting_payment", "pending", at(5), "awaiting_payment", at(90)),
		order("c", "pending", "pending", at(5)),
		order("d", "rejected", "pending", at(5), "rejected", at(30)),
		order("timed-out", "awaiting_payment", "pending", at(5), "awaiting_payment", at(50)),
	}
	r := &Report{ByStatus: map[string]int{}, Accepted: len(accepted)}
	r.tally(accepted, listed)

	assert.Equal(t, map[string]int{"awaiting_payment": 3, "pending": 1, "rejected": 1}, r.ByStatus)
	assert.Equal(t, 1, r.Unacked, "timed-out exists without a 2xx")
	assert.Equal(t, 1, r.Unlisted, "lost")
	assert.Equal(t, 2, r.Awaited)
	assert.Equal(t, 2, r.NotAwaited, "c still pending and lost; d was rejected, not slow")
	assert.Equal(t, 90*time.Millisecond, r.AwaitP50, "of 40, 90, ∞, ∞")
	assert.Equal(t, time.Duration(-1), r.AwaitP99)
	assert.Equal(t, [2]time.Duration{40 * time.Millisecond, 90 * time.Millisecond}, [2]time.Duration{r.ReachedP50, r.ReachedP99})
}

func TestChecksAndText(t *testing.T) {
	r := &Report{
		Config: Config{Rate: 300, Duration: time.Minute, SKU: "LOAD-1", MaxWorkers: 2000, Grace: time.Minute},
		Sent:   18000, SentRate: 300, Elapsed: 60 * time.Second, Accepted: 18000,
		Codes:    map[int]int{201: 18000},
		ByStatus: map[string]int{"awaiting_payment": 17990, "pending": 10},
		Before:   flashsale.SKUFigures{OnHand: 18000, Available: 18000},
		After:    flashsale.SKUFigures{OnHand: 18000, Available: 5, Locked: 17995},
		AwaitP50: 80 * time.Millisecond, AwaitP99: 450 * time.Millisecond,
		RSSReset: true, PeakRSS: 150 << 20,
	}
	r.check(flashsale.VerifyReport{Consistent: true})
	assert.False(t, r.Failed(), "%+v", r.Checks)

	var b strings.Builder
	require.NoError(t, r.WriteText(&b))
	out := b.String()
	assert.Contains(t, out, "accepted:  18000 (2xx) = 300.0 orders/s over 1m0s")
	assert.Contains(t, out, "not met  >= 3000 orders/s accepted for 60 s: 300.0/s")
	assert.Contains(t, out, "\n  met  p99 POST → awaiting_payment <= 500 ms: 450.0 ms")
	assert.Contains(t, out, "\n  met  stock service RSS < 200 MiB: 150.0 MiB (VmHWM, since the attack began)")

	r.Checks = nil
	r.After.Available, r.After.Locked = -1, 18001
	r.check(flashsale.VerifyReport{Consistent: true})
	assert.True(t, r.Failed())
	assert.False(t, r.Checks[0].Pass, "oversold")
	assert.False(t, r.Checks[1].Pass, "more units locked than orders awaiting payment or pending")
}
