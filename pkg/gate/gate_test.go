package gate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/gate/redistest"
)

func newGate(t *testing.T) (*gate.Gate, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	g, err := gate.New(gate.Config{RedisURL: srv.URL, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return g, srv
}

func TestUnarmedSKUsAreOpenAndANilGateIsNeverArmed(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	v, _ := g.Take(ctx, "o1", []gate.Line{{SKU: "A", Qty: 1}})
	assert.Equal(t, gate.Open, v)

	var none *gate.Gate
	v, _ = none.Take(ctx, "o1", []gate.Line{{SKU: "A", Qty: 1}})
	assert.Equal(t, gate.Open, v)
	n, err := none.GiveBack(ctx, "o1")
	assert.NoError(t, err)
	assert.Zero(t, n)
	assert.ErrorIs(t, none.Arm(ctx, "A", 1), gate.ErrUnavailable, "arming needs a Redis")
}

// An order whose SKUs a Take found unarmed moments ago is answered Open without asking Redis:
// a SKU another process arms meanwhile is gated here within gate.UnarmedFor, and at once when
// it is armed through this Gate. An order naming a SKU not remembered still asks.
func TestATakeRemembersUnarmedSKUsForAMoment(t *testing.T) {
	g, srv := newGate(t)
	other, err := gate.New(gate.Config{RedisURL: srv.URL, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	ctx := context.Background()
	a := []gate.Line{{SKU: "A", Qty: 1}}

	v, _ := g.Take(ctx, "o1", a)
	require.Equal(t, gate.Open, v)
	require.NoError(t, other.Arm(ctx, "A", 0), "another process arms A with nothing left")
	v, _ = g.Take(ctx, "o2", a)
	assert.Equal(t, gate.Open, v, "A was found unarmed a moment ago: Redis is not asked")
	n, err := g.TakeLocked(ctx, "o2", a)
	require.NoError(t, err)
	assert.Zero(t, n, "nor for the lock of an order taken as unarmed")
	st, err := g.State(ctx, "A")
	require.NoError(t, err)
	assert.Zero(t, st.Remaining, "the lock was not counted")
	v, sku := g.Take(ctx, "o3", []gate.Line{{SKU: "A", Qty: 1}, {SKU: "B", Qty: 1}})
	assert.Equal(t, gate.SoldOut, v, "B is not remembered: the order asks, and A is armed")
	assert.Equal(t, "A", sku)
	require.Eventually(t, func() bool {
		v, _ := g.Take(ctx, "o4", a)
		return v == gate.SoldOut
	}, 5*gate.UnarmedFor, 50*time.Millisecond, "A was never gated here")

	v, _ = g.Take(ctx, "o5", []gate.Line{{SKU: "C", Qty: 1}})
	require.Equal(t, gate.Open, v)
	require.NoError(t, g.Arm(ctx, "C", 0))
	v, _ = g.Take(ctx, "o6", []gate.Line{{SKU: "C", Qty: 1}})
	assert.Equal(t, gate.SoldOut, v, "armed through this Gate: gated at once")
}

func TestTakeIsAllOrNothingAndIdempotentPerOrder(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	require.NoError(t, g.Arm(ctx, "A", 3))
	require.NoError(t, g.Arm(ctx, "B", 1))

	v, _ := g.Take(ctx, "o1", []gate.Line{{SKU: "A", Qty: 2}, {SKU: "B", Qty: 1}, {SKU: "C", Qty: 9}})
	assert.Equal(t, gate.Admitted, v, "C is not armed: only A and B count")
	v, _ = g.Take(ctx, "o1", []gate.Line{{SKU: "A", Qty: 2}, {SKU: "B", Qty: 1}})
	assert.Equal(t, gate.Admitted, v, "a retry of the same order")

	v, sku := g.Take(ctx, "o2", []gate.Line{{SKU: "A", Qty: 1}, {SKU: "B", Qty: 1}})
	assert.Equal(t, gate.SoldOut, v)
	assert.Equal(t, "B", sku)

	a, err := g.State(ctx, "A")
	require.NoError(t, err)
	assert.Equal(t, int64(1), a.Remaining, "o2 took nothing from A: all or nothing")
	require.Len(t, a.Held, 1)
	assert.Equal(t, gate.Hold{OrderID: "o1", Qty: 2, TakenAt: a.Held[0].TakenAt}, a.Held[0])
	assert.True(t, a.Armed)
}

func TestGiveBackOnceAndOnlyToArmedSKUs(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	require.NoError(t, g.Arm(ctx, "A", 5))
	require.NoError(t, g.Arm(ctx, "B", 5))
	v, _ := g.Take(ctx, "o1", []gate.Line{{SKU: "A", Qty: 2}, {SKU: "B", Qty: 3}})
	require.Equal(t, gate.Admitted, v)
	require.NoError(t, g.Disarm(ctx, "B"))

	n, err := g.GiveBack(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "B was disarmed: nothing to give back to")
	n, err = g.GiveBack(ctx, "o1")
	require.NoError(t, err)
	assert.Zero(t, n, "given back once")
	n, err = g.GiveBack(ctx, "never-took")
	require.NoError(t, err)
	assert.Zero(t, n)

	a, err := g.State(ctx, "A")
	require.NoError(t, err)
	assert.Equal(t, int64(5), a.Remaining)
	assert.Empty(t, a.Held)
	v, _ = g.Take(ctx, "o1", []gate.Line{{SKU: "A", Qty: 2}})
	assert.Equal(t, gate.Admitted, v, "an order given back is not taken again")
	a, _ = g.State(ctx, "A")
	assert.Equal(t, int64(5), a.Remaining)
}

// TestManyBuyersForTheLastUnits: 400 buyers at once for 37 units, one each — exactly 37 are
// admitted and the counter ends at zero.
func TestManyBuyersForTheLastUnits(t *testing.T) {
	// Atomicity, not speed: 400 takes at once open up to 128 connections, which under -race
	// on a busy machine may take longer than the production timeout.
	srv := redistest.Start(t)
	g, err := gate.New(gate.Config{RedisURL: srv.URL, Timeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	ctx := context.Background()
	require.NoError(t, g.Arm(ctx, "HOT", 37))
	var admitted, soldOut atomic.Int64
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Go(func() {
			switch v, _ := g.Take(ctx, fmt.Sprintf("o%d", i), []gate.Line{{SKU: "HOT", Qty: 1}}); v {
			case gate.Admitted:
				admitted.Add(1)
			case gate.SoldOut:
				soldOut.Add(1)
			default:
				t.Errorf("verdict %s", v)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(37), admitted.Load())
	assert.Equal(t, int64(363), soldOut.Load())
	st, err := g.State(ctx, "HOT")
	require.NoError(t, err)
	assert.Zero(t, st.Remaining)
	assert.Len(t, st.Held, 37)
}

// TestArmingAnArmedSKUChangesNothing: the operator's arming and the gate job's can both find
// a SKU unarmed; the second must not hand out again what was taken since the first.
func TestArmingAnArmedSKUChangesNothing(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	require.NoError(t, g.Arm(ctx, "A", 3))
	v, _ := g.Take(ctx, "o1", []gate.Line{{SKU: "A", Qty: 2}})
	require.Equal(t, gate.Admitted, v)
	require.NoError(t, g.Arm(ctx, "A", 3))
	st, err := g.State(ctx, "A")
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Remaining)
	assert.Len(t, st.Held, 1)
	v, _ = g.Take(ctx, "o2", []gate.Line{{SKU: "A", Qty: 2}})
	assert.Equal(t, gate.SoldOut, v)
}

func TestAdjustAndArmedList(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	_, ok, err := g.Adjust(ctx, "A", 5)
	require.NoError(t, err)
	assert.False(t, ok, "not armed")
	require.NoError(t, g.Arm(ctx, "A", 2))
	r, ok, err := g.Adjust(ctx, "A", -5)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Zero(t, r, "never below zero")
	r, _, _ = g.Adjust(ctx, "A", 4)
	assert.Equal(t, int64(4), r)
	v, _ := g.Take(ctx, "o", []gate.Line{{SKU: "A", Qty: 1}})
	require.Equal(t, gate.Admitted, v)
	skus, err := g.Armed(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"A"}, skus)
}

// TestRedisDownIsBypassed: with Redis gone every take answers Bypassed within the timeout,
// the breaker opens, and once Redis is back (empty) the SKU is simply not armed.
func TestRedisDownIsBypassed(t *testing.T) {
	g, srv := newGate(t)
	ctx := context.Background()
	require.NoError(t, g.Arm(ctx, "A", 1))
	srv.Stop()
	for i := range 10 {
		v, _ := g.Take(ctx, fmt.Sprint("o", i), []gate.Line{{SKU: "A", Qty: 1}})
		assert.Equal(t, gate.Bypassed, v)
	}
	_, err := g.GiveBack(ctx, "o1")
	assert.ErrorIs(t, err, gate.ErrUnavailable)

	srv.Restart()
	require.Eventually(t, func() bool {
		v, _ := g.Take(ctx, "after", []gate.Line{{SKU: "A", Qty: 1}})
		return v == gate.Open
	}, 10*time.Second, 50*time.Millisecond, "the breaker closes again and the empty Redis has no gate")
}

func TestConfigValidate(t *testing.T) {
	assert.NoError(t, gate.Config{Timeout: 50 * time.Millisecond}.Validate())
	assert.NoError(t, gate.Config{RedisURL: "redis://127.0.0.1:6379/0", Timeout: 50 * time.Millisecond}.Validate())
	assert.Error(t, gate.Config{RedisURL: "http://x", Timeout: 50 * time.Millisecond}.Validate())
	assert.Error(t, gate.Config{Timeout: 0}.Validate())
}

func TestTakeLockedCountsABypassedOrderOnceAndItsReleaseGivesItBack(t *testing.T) {
	g, _ := newGate(t)
	ctx := context.Background()
	require.NoError(t, g.Arm(ctx, "A", 2))

	v, _ := g.Take(ctx, "admitted", []gate.Line{{SKU: "A", Qty: 1}})
	require.Equal(t, gate.Admitted, v)
	n, err := g.TakeLocked(ctx, "admitted", []gate.Line{{SKU: "A", Qty: 1}})
	require.NoError(t, err)
	assert.Zero(t, n, "an order the gate admitted is counted already")

	// "bypassed" locked in the database while Redis did not answer: the gate comes down with it.
	n, err = g.TakeLocked(ctx, "bypassed", []gate.Line{{SKU: "A", Qty: 1}, {SKU: "unarmed", Qty: 4}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "only the armed SKU counts")
	n, err = g.TakeLocked(ctx, "bypassed", []gate.Line{{SKU: "A", Qty: 1}})
	require.NoError(t, err)
	assert.Zero(t, n, "a replayed lock outcome takes nothing more")
	a, err := g.State(ctx, "A")
	require.NoError(t, err)
	assert.Zero(t, a.Remaining)
	v, _ = g.Take(ctx, "loser", []gate.Line{{SKU: "A", Qty: 1}})
	assert.Equal(t, gate.SoldOut, v, "the gate is sold out with the database")

	// Two more bypassed locks than the gate was armed with: it goes below zero rather than
	// forget, so their releases bring it back to exactly what the database has free.
	n, err = g.TakeLocked(ctx, "over", []gate.Line{{SKU: "A", Qty: 2}})
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	a, _ = g.State(ctx, "A")
	assert.Equal(t, int64(-2), a.Remaining)
	for _, id := range []string{"over", "bypassed"} {
		_, err := g.GiveBack(ctx, id)
		require.NoError(t, err)
	}
	a, _ = g.State(ctx, "A")
	assert.Equal(t, int64(1), a.Remaining, "the bypassed order's unit is back; the admitted one's still held")
	require.Len(t, a.Held, 1)
	assert.Equal(t, "admitted", a.Held[0].OrderID)
}
