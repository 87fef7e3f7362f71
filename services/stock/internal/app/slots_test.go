package app_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// slotFigures reads the available units of each slot of a SKU from the ledger: the after
// figures of each slot's last row.
func slotAvailable(t *testing.T, svc *app.Service, sku string) map[int]int64 {
	t.Helper()
	entries, err := svc.Ledger(context.Background(), sku, app.LedgerQuery{Limit: 10000})
	require.NoError(t, err)
	out := map[int]int64{}
	for _, e := range entries {
		out[e.Slot] = e.After.Available()
	}
	return out
}

func TestSetSlotsSpreadsStockEvenlyAndKeepsTotals(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	_, err := svc.CreateSKU(ctx, "HOT", 10, "test")
	require.NoError(t, err)

	st, entries, err := svc.SetSlots(ctx, "HOT", 4, "ops")
	require.NoError(t, err)
	assert.Equal(t, 4, st.Slots)
	assert.Equal(t, int64(10), st.Available(), "a rebalance moves units, never makes or loses them")
	assert.Equal(t, map[int]int64{0: 3, 1: 3, 2: 2, 3: 2}, slotAvailable(t, svc, "HOT"))
	for _, e := range entries {
		assert.Equal(t, stock.ChangeRebalance, e.Type)
	}
	requireConsistent(t, svc)

	_, entries, err = svc.Rebalance(ctx, "HOT", "ops")
	require.NoError(t, err)
	assert.Empty(t, entries, "already even: nothing written")

	_, _, err = svc.SetSlots(ctx, "HOT", 0, "ops")
	assert.ErrorIs(t, err, stock.ErrBadSlots)
	_, _, err = svc.SetSlots(ctx, "NOPE", 2, "ops")
	assert.ErrorIs(t, err, stock.ErrUnknownSKU)
}

func TestALockSweepsEverySlotBeforeRefusing(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	_, err := svc.CreateSKU(ctx, "HOT", 10, "test")
	require.NoError(t, err)
	_, _, err = svc.SetSlots(ctx, "HOT", 4, "ops") // 3, 3, 2, 2
	require.NoError(t, err)
	deadline := time.Now().Add(time.Hour)

	res, err := svc.LockForOrder(ctx, nil, "big", []events.Line{line("HOT", 9)}, deadline, "test")
	require.NoError(t, err)
	assert.True(t, res.Locked, "9 units fit in no single slot, but the SKU has 10: slots are gathered into one")
	res, err = svc.LockForOrder(ctx, nil, "one", []events.Line{line("HOT", 1)}, deadline, "test")
	require.NoError(t, err)
	assert.True(t, res.Locked, "the last unit, wherever it sits")
	res, err = svc.LockForOrder(ctx, nil, "none", []events.Line{line("HOT", 1)}, deadline, "test")
	require.NoError(t, err)
	assert.False(t, res.Locked, "sold out in every slot")

	s, err := svc.GetSKU(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, int64(10), s.Locked)
	requireConsistent(t, svc)

	// The locks resolve in the slots they took.
	_, err = svc.SellLocked(ctx, nil, "big", "pay-1", "test")
	require.NoError(t, err)
	_, err = svc.ReleaseLock(ctx, nil, "one", stock.ChangeReleaseCancel, "test")
	require.NoError(t, err)
	s, err = svc.GetSKU(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{OnHand: 10, Sold: 9}, s.Quantities)
	requireConsistent(t, svc)
}

func TestFewerSlotsRetireRowsWithoutLosingLocks(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	_, err := svc.CreateSKU(ctx, "HOT", 8, "test")
	require.NoError(t, err)
	_, _, err = svc.SetSlots(ctx, "HOT", 4, "ops") // 2 each
	require.NoError(t, err)
	deadline := time.Now().Add(-time.Minute) // passed: the timeouts are due
	for i := range 6 {
		res, err := svc.LockForOrder(ctx, nil, fmt.Sprintf("o-%d", i), []events.Line{line("HOT", 1)}, deadline, "test")
		require.NoError(t, err)
		require.True(t, res.Locked)
	}

	st, _, err := svc.SetSlots(ctx, "HOT", 1, "ops")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{OnHand: 8, Locked: 6}, st.Quantities)
	avail := slotAvailable(t, svc, "HOT")
	assert.Equal(t, int64(2), avail[0], "the retired slots handed their available units to slot 0")
	for slot := 1; slot < 4; slot++ {
		assert.Zero(t, avail[slot], "slot %d", slot)
	}
	requireConsistent(t, svc)

	// Locks held in retired slots still sell and release there.
	for i := range 6 {
		if i%2 == 0 {
			_, err = svc.SellLocked(ctx, nil, fmt.Sprintf("o-%d", i), fmt.Sprintf("p-%d", i), "test")
		} else {
			_, err = svc.ReleaseLock(ctx, nil, fmt.Sprintf("o-%d", i), stock.ChangeReleaseTimeout, "test")
		}
		require.NoError(t, err)
	}
	res, err := svc.LockForOrder(ctx, nil, "after", []events.Line{line("HOT", 5)}, deadline, "test")
	require.NoError(t, err)
	assert.True(t, res.Locked, "units released in a retired slot are gathered too")
	st, err = svc.GetSKU(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{OnHand: 8, Locked: 5, Sold: 3}, st.Quantities)
	requireConsistent(t, svc)
}

func TestAReceivedPurchaseIsSpreadOverTheSlots(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	_, err := svc.CreateSKU(ctx, "HOT", 0, "test")
	require.NoError(t, err)
	_, _, err = svc.SetSlots(ctx, "HOT", 3, "ops")
	require.NoError(t, err)
	_, _, err = svc.ExpectPurchase(ctx, "HOT", stock.MustQty(9), "po-1", "buyer", "")
	require.NoError(t, err)
	_, _, err = svc.ReceivePurchase(ctx, "HOT", stock.MustQty(9), "po-1", "warehouse", "")
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{0: 3, 1: 3, 2: 3}, slotAvailable(t, svc, "HOT"))
	requireConsistent(t, svc)
}

// TestABatchFillsOrdersInArrivalOrder: when the sum of a batch does not fit, the orders are
// filled one by one in arrival order — a later, smaller order still gets the stock an earlier,
// larger one could not take.
func TestABatchFillsOrdersInArrivalOrder(t *testing.T) {
	ctx := context.Background()
	svc := newServiceWith(t, combine.Options{MaxBatch: 3, MaxWait: time.Second, Flushers: 1})
	_, err := svc.CreateSKU(ctx, "HOT", 5, "test")
	require.NoError(t, err)
	deadline := time.Now().Add(time.Hour)

	want := []struct {
		order  string
		qty    int64
		locked bool
	}{{"first", 3, true}, {"second", 3, false}, {"third", 2, true}}
	var wg sync.WaitGroup
	for _, w := range want {
		wg.Go(func() {
			res, err := svc.LockForOrder(ctx, nil, w.order, []events.Line{line("HOT", w.qty)}, deadline, "test")
			require.NoError(t, err)
			assert.Equal(t, w.locked, res.Locked, w.order)
		})
		time.Sleep(100 * time.Millisecond) // arrival order; the batch waits for all three
	}
	wg.Wait()
	s, err := svc.GetSKU(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, int64(0), s.Available())
	requireConsistent(t, svc)
}

// TestOneFailingRequestDoesNotFailItsBatch: a sell for an order stock has not seen (retry
// later) shares a batch with good ones; they commit, its message claim is withdrawn so that
// the redelivery is processed, and the same message twice in a batch is applied once.
func TestOneFailingRequestDoesNotFailItsBatch(t *testing.T) {
	ctx := context.Background()
	svc := newServiceWith(t, combine.Options{MaxBatch: 4, MaxWait: 300 * time.Millisecond, Flushers: 1})
	_, err := svc.CreateSKU(ctx, "HOT", 5, "test")
	require.NoError(t, err)
	deadline := time.Now().Add(time.Hour)
	for _, o := range []string{"a", "b"} {
		_, err := svc.LockForOrder(ctx, nil, o, []events.Line{line("HOT", 1)}, deadline, "test")
		require.NoError(t, err)
	}
	in := func(id string) *inbox.Message { return &inbox.Message{Consumer: "stock-payment-succeeded", ID: id} }

	var wg sync.WaitGroup
	results := make([]app.Resolution, 4)
	errs := make([]error, 4)
	calls := []struct{ msg, order string }{{"m-a", "a"}, {"m-x", "unseen"}, {"m-b", "b"}, {"m-a", "a"}}
	for i, c := range calls {
		wg.Go(func() { results[i], errs[i] = svc.SellLocked(ctx, in(c.msg), c.order, "pay-"+c.order, "test") })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[2])
	require.NoError(t, errs[3])
	assert.ErrorIs(t, errs[1], stock.ErrOrderUnknown)
	assert.True(t, results[2].Applied, "the good sells committed")
	assert.True(t, results[0].Applied != results[3].Applied, "one delivery of m-a sold the order")
	assert.True(t, results[0].Duplicate != results[3].Duplicate, "the other was recognised as the same message")

	_, err = svc.LockForOrder(ctx, nil, "unseen", []events.Line{line("HOT", 1)}, deadline, "test")
	require.NoError(t, err)
	res, err := svc.SellLocked(ctx, in("m-x"), "unseen", "pay-unseen", "test")
	require.NoError(t, err)
	assert.True(t, res.Applied, "the redelivered message is fresh: its claim was withdrawn")
	s, err := svc.GetSKU(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, int64(3), s.Sold)
	requireConsistent(t, svc)
}

// TestALockBatchWithAnOrderSeenBefore: the batch's claims and its slot go in one round trip,
// the slot asked for all of the batch's orders, the one seen before included. With stock for
// only the new ones, no slot has that much: the batch takes the slow path and still locks
// every new order, and the old one answers its first outcome.
func TestALockBatchWithAnOrderSeenBefore(t *testing.T) {
	ctx := context.Background()
	svc := newServiceWith(t, combine.Options{MaxBatch: 3, MaxWait: 300 * time.Millisecond, Flushers: 1})
	_, err := svc.CreateSKU(ctx, "HOT", 3, "test")
	require.NoError(t, err)
	deadline := time.Now().Add(time.Hour)
	first, err := svc.LockForOrder(ctx, nil, "a", []events.Line{line("HOT", 1)}, deadline, "test")
	require.NoError(t, err)
	require.True(t, first.Locked)

	var wg sync.WaitGroup
	orders := []string{"a", "b", "c"}
	results := make([]stock.LockResult, len(orders))
	errs := make([]error, len(orders))
	for i, o := range orders {
		wg.Go(func() {
			results[i], errs[i] = svc.LockForOrder(ctx, nil, o, []events.Line{line("HOT", 1)}, deadline, "test")
		})
	}
	wg.Wait()
	for i, o := range orders {
		require.NoError(t, errs[i], o)
		assert.True(t, results[i].Locked, o)
	}
	assert.True(t, results[0].Duplicate, "a was locked before")
	assert.False(t, results[1].Duplicate || results[2].Duplicate)
	s, err := svc.GetSKU(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, int64(3), s.Locked)
	assert.Zero(t, s.Available())
	requireConsistent(t, svc)
}
