package app_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

func newService(t *testing.T) *app.Service {
	t.Helper()
	return newServiceWith(t, combine.Options{})
}

func newServiceWith(t *testing.T, opts combine.Options) *app.Service {
	t.Helper()
	svc, _ := newServiceAndPool(t, opts)
	return svc
}

// newServiceAndPool is newServiceWith that also returns the pool, for a test that writes what
// no use case would.
func newServiceAndPool(t *testing.T, opts combine.Options) (*app.Service, *pgxpool.Pool) {
	t.Helper()
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	svc := app.NewCombining(postgres.NewStore(pool), opts)
	t.Cleanup(svc.Close)
	return svc, pool
}

// mode is one way the lock path can run: combined or one request per transaction, on SKUs of
// one slot or several.
type mode struct {
	name  string
	opts  combine.Options
	slots int
}

var modes = []mode{
	{"combined", combine.Options{}, 1},
	{"one by one", combine.Options{MaxBatch: 1, Flushers: 8}, 1},
	{"combined, 4 slots", combine.Options{}, 4},
	{"one by one, 4 slots", combine.Options{MaxBatch: 1, Flushers: 8}, 4},
}

// createSKUs creates each SKU with onHand units, split into m.slots slots.
func (m mode) createSKUs(t *testing.T, svc *app.Service, onHand int64, skus ...string) {
	t.Helper()
	for _, sku := range skus {
		_, err := svc.CreateSKU(context.Background(), sku, onHand, "test")
		require.NoError(t, err)
		if m.slots > 1 {
			_, _, err := svc.SetSlots(context.Background(), sku, m.slots, "test")
			require.NoError(t, err)
		}
	}
}

func line(sku string, n int64) events.Line { return events.Line{SKU: sku, Qty: n} }

func requireConsistent(t *testing.T, svc *app.Service) {
	t.Helper()
	diffs, err := svc.Verify(context.Background())
	require.NoError(t, err)
	require.Empty(t, diffs, "verify found differences")
}

func TestLockRace_500BuyersFor100Units(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { lockRace(t, m) })
	}
}

func lockRace(t *testing.T, m mode) {
	ctx := context.Background()
	svc := newServiceWith(t, m.opts)
	m.createSKUs(t, svc, 100, "CUP-1")

	var won, lost atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Hour)
	for i := range 500 {
		wg.Go(func() {
			res, err := svc.LockForOrder(ctx, nil, fmt.Sprintf("o-%d", i), []events.Line{line("CUP-1", 1)}, deadline, "test")
			if !assert.NoError(t, err) {
				return
			}
			if res.Locked {
				won.Add(1)
			} else {
				assert.Equal(t, stock.RejectInsufficient, res.Reason)
				lost.Add(1)
			}
		})
	}
	wg.Wait()

	assert.Equal(t, int64(100), won.Load())
	assert.Equal(t, int64(400), lost.Load())
	s, err := svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, int64(0), s.Available())
	assert.Equal(t, int64(100), s.Locked)
	var locks int
	entries, err := svc.Ledger(ctx, "CUP-1", app.LedgerQuery{Limit: 1000})
	require.NoError(t, err)
	for _, e := range entries {
		if e.Type == stock.ChangeLock {
			locks++
		}
	}
	assert.Equal(t, 100, locks, "one lock ledger row per winning order")
	requireConsistent(t, svc)
}

func TestMultiSKULocks_NoDeadlockNoPartialLock(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { multiSKULocks(t, m) })
	}
}

func multiSKULocks(t *testing.T, m mode) {
	ctx := context.Background()
	svc := newServiceWith(t, m.opts)
	skus := []string{"A", "B", "C", "D", "E"}
	m.createSKUs(t, svc, 60, skus...)
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Hour)
	results := make([]stock.LockResult, 300)
	for i := range results {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			var lines []events.Line
			// Overlapping sets in every order of listing: the store must sort them.
			for _, j := range r.Perm(len(skus))[:1+r.IntN(len(skus))] {
				lines = append(lines, line(skus[j], int64(1+r.IntN(2))))
			}
			res, err := svc.LockForOrder(ctx, nil, fmt.Sprintf("m-%d", i), lines, deadline, "test")
			require.NoError(t, err, "no deadlock or serialization error may surface")
			results[i] = res
		})
	}
	wg.Wait()

	locked := map[string]int64{}
	for _, res := range results {
		held, err := svc.Locks(ctx, res.OrderID)
		require.NoError(t, err)
		if res.Locked {
			assert.Len(t, held, len(res.Lines), "a locked order holds every line")
			for _, l := range res.Lines {
				locked[l.SKU] += l.Qty.Int64()
			}
		} else {
			assert.Empty(t, held, "a rejected order holds no line at all")
		}
	}
	for _, s := range skus {
		got, err := svc.GetSKU(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, locked[s], got.Locked, s)
		assert.GreaterOrEqual(t, got.Available(), int64(0))
	}
	requireConsistent(t, svc)
}

func TestLedgerIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	svc := app.New(postgres.NewStore(pool))
	_, err := svc.CreateSKU(ctx, "CUP-1", 10, "test")
	require.NoError(t, err)

	for name, sql := range map[string]string{
		"update":   `UPDATE stock_ledger SET qty = 99`,
		"delete":   `DELETE FROM stock_ledger`,
		"truncate": `TRUNCATE stock_ledger CASCADE`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.Exec(ctx, sql)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "append-only")
		})
	}
	entries, err := svc.Ledger(ctx, "CUP-1", app.LedgerQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, int64(10), entries[0].Qty)
}

func TestSummaryConstraintsRefuseInconsistentRows(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	svc := app.New(postgres.NewStore(pool))
	_, err := svc.CreateSKU(ctx, "CUP-1", 10, "test")
	require.NoError(t, err)
	for name, sql := range map[string]string{
		"available not derived": `UPDATE sku_stock SET available = 11`,
		"negative locked":       `UPDATE sku_stock SET locked = -1, available = 11`,
		"oversold":              `UPDATE sku_stock SET sold = 11, available = -1`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.Exec(ctx, sql)
			assert.ErrorContains(t, err, "violates check constraint")
		})
	}
}

func TestResolveOnce(t *testing.T) {
	ctx := context.Background()
	deadline := time.Now().Add(-time.Minute) // passed: the timeouts are due
	type step struct {
		do       func(*app.Service, string) (app.Resolution, error)
		applied  bool
		state    string
		relocked bool
	}
	sell := func(s *app.Service, o string) (app.Resolution, error) { return s.SellLocked(ctx, nil, o, "pay-1", "t") }
	timeout := func(s *app.Service, o string) (app.Resolution, error) {
		return s.ReleaseLock(ctx, nil, o, stock.ChangeReleaseTimeout, "t")
	}
	cancel := func(s *app.Service, o string) (app.Resolution, error) {
		return s.ReleaseLock(ctx, nil, o, stock.ChangeReleaseCancel, "t")
	}
	ship := func(s *app.Service, o string) (app.Resolution, error) { return s.ShipOrder(ctx, nil, o, "t") }
	refund := func(s *app.Service, o string) (app.Resolution, error) { return s.RefundOrder(ctx, nil, o, "t") }

	cases := []struct {
		name  string
		steps []step
		want  stock.Quantities
	}{
		{"sell twice counts once", []step{{sell, true, "sold", false}, {sell, false, "sold", false}},
			stock.Quantities{OnHand: 10, Sold: 2}},
		{"release after sell is a no-op", []step{{sell, true, "sold", false}, {timeout, false, "sold", false}},
			stock.Quantities{OnHand: 10, Sold: 2}},
		{"release twice counts once", []step{{timeout, true, "released", false}, {cancel, false, "released", false}},
			stock.Quantities{OnHand: 10}},
		{"late payment re-locks and sells", []step{{timeout, true, "released", false}, {sell, true, "sold", true}, {sell, false, "sold", false}},
			stock.Quantities{OnHand: 10, Sold: 2}},
		{"ship then refund restocks returned goods", []step{{sell, true, "sold", false}, {ship, true, "shipped", false}, {ship, false, "shipped", false}, {refund, true, "refunded", false}, {refund, false, "refunded", false}},
			stock.Quantities{OnHand: 10}},
		{"refund before shipping", []step{{sell, true, "sold", false}, {refund, true, "refunded", false}, {sell, false, "refunded", false}},
			stock.Quantities{OnHand: 10}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			_, err := svc.CreateSKU(ctx, "CUP-1", 10, "t")
			require.NoError(t, err)
			_, err = svc.LockForOrder(ctx, nil, "o1", []events.Line{line("CUP-1", 2)}, deadline, "t")
			require.NoError(t, err)
			for i, st := range tc.steps {
				res, err := st.do(svc, "o1")
				require.NoError(t, err, "step %d", i)
				assert.Equal(t, st.applied, res.Applied, "step %d applied", i)
				assert.Equal(t, st.state, res.State, "step %d state", i)
				assert.Equal(t, st.relocked, res.Relocked, "step %d relocked", i)
			}
			got, err := svc.GetSKU(ctx, "CUP-1")
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Quantities)
			requireConsistent(t, svc)
		})
	}
}

func TestLatePaymentWithoutStockFailsAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	deadline := time.Now().Add(-time.Minute) // passed: the timeout is due
	_, err := svc.CreateSKU(ctx, "CUP-1", 2, "t")
	require.NoError(t, err)
	_, err = svc.LockForOrder(ctx, nil, "late", []events.Line{line("CUP-1", 2)}, deadline, "t")
	require.NoError(t, err)
	_, err = svc.ReleaseLock(ctx, nil, "late", stock.ChangeReleaseTimeout, "t")
	require.NoError(t, err)
	res, err := svc.LockForOrder(ctx, nil, "other", []events.Line{line("CUP-1", 1)}, deadline, "t")
	require.NoError(t, err)
	require.True(t, res.Locked)

	res2, err := svc.SellLocked(ctx, nil, "late", "pay-late", "t")
	require.NoError(t, err, "a sale that cannot be made is an outcome: stock.sell_failed")
	assert.Equal(t, stock.SellFailedInsufficient, res2.Failed)
	assert.False(t, res2.Applied)
	locks, err := svc.Locks(ctx, "late")
	require.NoError(t, err)
	assert.Equal(t, stock.StateReleased, locks[0].State())
	got, err := svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{OnHand: 2, Locked: 1}, got.Quantities)

	_, err = svc.SellLocked(ctx, nil, "never-locked", "pay-x", "t")
	require.ErrorIs(t, err, stock.ErrOrderUnknown, "stock has not seen the order yet: retry")
	requireConsistent(t, svc)
}

func TestLockReplayReturnsFirstOutcome(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	deadline := time.Now().Add(time.Hour)
	_, err := svc.CreateSKU(ctx, "CUP-1", 1, "t")
	require.NoError(t, err)

	first, err := svc.LockForOrder(ctx, nil, "big", []events.Line{line("CUP-1", 5)}, deadline, "t")
	require.NoError(t, err)
	require.False(t, first.Locked)
	assert.Equal(t, "CUP-1", first.SKU)

	// Stock arrives; the replay of the same order still answers with the first outcome.
	_, _, err = svc.ExpectPurchase(ctx, "CUP-1", stock.MustQty(10), "po-1", "t", "")
	require.NoError(t, err)
	_, _, err = svc.ReceivePurchase(ctx, "CUP-1", stock.MustQty(10), "po-1", "t", "")
	require.NoError(t, err)
	again, err := svc.LockForOrder(ctx, nil, "big", []events.Line{line("CUP-1", 5)}, deadline, "t")
	require.NoError(t, err)
	assert.True(t, again.Duplicate)
	assert.False(t, again.Locked)
	assert.Equal(t, stock.RejectInsufficient, again.Reason)

	ok, err := svc.LockForOrder(ctx, nil, "small", []events.Line{line("CUP-1", 1)}, deadline, "t")
	require.NoError(t, err)
	require.True(t, ok.Locked)
	dup, err := svc.LockForOrder(ctx, nil, "small", []events.Line{line("CUP-1", 1)}, deadline, "t")
	require.NoError(t, err)
	assert.True(t, dup.Duplicate)
	assert.True(t, dup.Locked)
	require.Len(t, dup.Lines, 1)

	got, err := svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{OnHand: 11, Locked: 1}, got.Quantities)
	requireConsistent(t, svc)
}

func TestPurchaseIdempotency(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	_, err := svc.CreateSKU(ctx, "CUP-1", 0, "t")
	require.NoError(t, err)
	first, dup, err := svc.ExpectPurchase(ctx, "CUP-1", stock.MustQty(5), "po-7", "t", "")
	require.NoError(t, err)
	assert.False(t, dup)
	again, dup, err := svc.ExpectPurchase(ctx, "CUP-1", stock.MustQty(5), "po-7", "t", "")
	require.NoError(t, err)
	assert.True(t, dup)
	assert.Equal(t, first.ID, again.ID)
	_, _, err = svc.ExpectPurchase(ctx, "CUP-1", stock.MustQty(6), "po-7", "t", "")
	assert.ErrorIs(t, err, stock.ErrIdempotencyReuse)
	_, _, err = svc.ReceivePurchase(ctx, "CUP-1", stock.MustQty(6), "po-7", "t", "")
	assert.ErrorIs(t, err, stock.ErrInsufficientStock, "cannot receive more than is incoming")
	got, err := svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{Incoming: 5}, got.Quantities)
	requireConsistent(t, svc)
}

func TestAdjustmentsNeedASecondOperator(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	_, err := svc.CreateSKU(ctx, "CUP-1", 10, "t")
	require.NoError(t, err)
	_, err = svc.LockForOrder(ctx, nil, "o1", []events.Line{line("CUP-1", 4)}, time.Now().Add(time.Hour), "t")
	require.NoError(t, err)

	minus := int64(-3)
	a, err := stock.NewAdjustment("CUP-1", stock.ChangeManualAdjust, &minus, nil, "broken in the warehouse", "alice")
	require.NoError(t, err)
	a, err = svc.RequestAdjustment(ctx, a)
	require.NoError(t, err)
	_, err = svc.DecideAdjustment(ctx, a.ID, true, "alice")
	require.ErrorIs(t, err, stock.ErrSelfApproval)
	got, _ := svc.GetSKU(ctx, "CUP-1")
	assert.Equal(t, int64(10), got.OnHand, "nothing moves before approval")
	_, err = svc.DecideAdjustment(ctx, a.ID, true, "bob")
	require.NoError(t, err)
	_, err = svc.DecideAdjustment(ctx, a.ID, true, "carol")
	require.ErrorIs(t, err, stock.ErrAdjustmentDecided)

	counted := int64(2) // below the 4 locked: approving it would make available negative
	st, err := stock.NewAdjustment("CUP-1", stock.ChangeStocktake, nil, &counted, "count", "alice")
	require.NoError(t, err)
	st, err = svc.RequestAdjustment(ctx, st)
	require.NoError(t, err)
	_, err = svc.DecideAdjustment(ctx, st.ID, true, "bob")
	require.ErrorIs(t, err, stock.ErrStocktakeConflict)

	counted = 5
	st2, err := stock.NewAdjustment("CUP-1", stock.ChangeStocktake, nil, &counted, "recount", "alice")
	require.NoError(t, err)
	st2, err = svc.RequestAdjustment(ctx, st2)
	require.NoError(t, err)
	st2, err = svc.DecideAdjustment(ctx, st2.ID, true, "bob")
	require.NoError(t, err)
	require.NotNil(t, st2.LedgerID)

	got, err = svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{OnHand: 5, Locked: 4}, got.Quantities)
	requireConsistent(t, svc)
}

func TestVerifyFindsAndRebuildRepairsAHandEditedSummary(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	svc := app.New(postgres.NewStore(pool))
	_, err := svc.CreateSKU(ctx, "CUP-1", 10, "t")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE sku_stock SET on_hand = 7, available = 7 WHERE sku = 'CUP-1'`)
	require.NoError(t, err)

	diffs, err := svc.Verify(ctx)
	require.NoError(t, err)
	require.Len(t, diffs, 1)
	assert.Equal(t, stock.Difference{SKU: "CUP-1", Check: "ledger_fold", Field: "on_hand", Summary: 7, Expect: 10}, diffs[0])

	changed, err := svc.Rebuild(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"CUP-1"}, changed)
	requireConsistent(t, svc)
	changed, err = svc.Rebuild(ctx)
	require.NoError(t, err)
	assert.Empty(t, changed)
}

// Lines stock cannot take at all are refused in one place, LockForOrder: an order.created is
// answered once with stock.lock_rejected (invalid_order), so the order ends rejected; an HTTP
// caller gets the validation error and nothing is emitted.
func TestLockForOrderRefusesLinesItCannotTake(t *testing.T) {
	ctx := context.Background()
	svc, pool := newServiceAndPool(t, combine.Options{})
	_, err := svc.CreateSKU(ctx, "CUP-1", 10, "t")
	require.NoError(t, err)
	deadline := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name  string
		lines []events.Line
		err   error
	}{
		{"no lines", nil, stock.ErrBadOrder},
		{"a zero quantity", []events.Line{{SKU: "CUP-1", Qty: 0}}, stock.ErrBadQuantity},
		{"a quantity out of range", []events.Line{{SKU: "CUP-1", Qty: stock.MaxQty + 1}}, stock.ErrBadQuantity},
		{"a malformed sku", []events.Line{{SKU: "has space", Qty: 1}}, stock.ErrBadSKU},
		{"lines that add up past the maximum", []events.Line{{SKU: "CUP-1", Qty: stock.MaxQty}, {SKU: "CUP-1", Qty: 1}}, stock.ErrBadQuantity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.LockForOrder(ctx, nil, "http", tc.lines, deadline, "t")
			assert.ErrorIs(t, err, tc.err, "an HTTP caller gets the error")

			in := &inbox.Message{Consumer: "stock-order-created", ID: "ev-" + tc.name}
			for range 2 { // the second time is a redelivery: nothing more is emitted
				res, err := svc.LockForOrder(ctx, in, tc.name, tc.lines, deadline, "t")
				require.NoError(t, err)
				assert.Equal(t, stock.LockResult{OrderID: tc.name, Reason: stock.RejectInvalidOrder}, res)
			}
			rows, err := pool.Query(ctx, `SELECT convert_from(data, 'UTF8')::jsonb->'data'->>'reason' FROM outbox
				WHERE subject = $1 AND convert_from(data, 'UTF8')::jsonb->'data'->>'order_id' = $2`, events.SubjectStockLockRejected, tc.name)
			require.NoError(t, err)
			reasons, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			assert.Equal(t, []string{stock.RejectInvalidOrder}, reasons, "one stock.lock_rejected for the order")
		})
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE convert_from(data, 'UTF8')::jsonb->'data'->>'order_id' = 'http'`).Scan(&n))
	assert.Zero(t, n, "nothing is emitted for an HTTP caller")
	got, err := svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, int64(10), got.Available(), "nothing moved")
}

// TestTimeoutIsJudgedOnTheServiceClock (F19): a timeout before the lock's deadline on the
// service's own clock moves nothing, writes no ledger row and leaves its message unclaimed; the
// same message once the clock reaches the deadline releases, and a third time is a duplicate.
// A cancellation does not wait for the deadline.
func TestTimeoutIsJudgedOnTheServiceClock(t *testing.T) {
	ctx := context.Background()
	deadline := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var now atomic.Int64 // the service's clock, in Unix microseconds
	now.Store(deadline.Add(-time.Minute).UnixMicro())
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	svc := app.New(postgres.NewStore(pool), app.WithClock(func() time.Time { return time.UnixMicro(now.Load()).UTC() }))
	t.Cleanup(svc.Close)
	_, err := svc.CreateSKU(ctx, "CUP-1", 10, "t")
	require.NoError(t, err)
	for _, id := range []string{"unpaid", "cancelled"} {
		_, err = svc.LockForOrder(ctx, nil, id, []events.Line{line("CUP-1", 2)}, deadline, "t")
		require.NoError(t, err)
	}
	ledgerRows := func() int {
		entries, err := svc.Ledger(ctx, "CUP-1", app.LedgerQuery{Limit: 100})
		require.NoError(t, err)
		return len(entries)
	}
	rowsBefore := ledgerRows()
	expired := &inbox.Message{Consumer: "stock-timeout-expired", ID: "timeout-expired:unpaid"}

	_, err = svc.ReleaseLock(ctx, expired, "unpaid", stock.ChangeReleaseTimeout, app.Operator)
	var notDue *stock.NotYetDueError
	require.ErrorAs(t, err, &notDue)
	assert.Equal(t, time.Minute, notDue.Wait)
	got, err := svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{OnHand: 10, Locked: 4}, got.Quantities)
	assert.Equal(t, rowsBefore, ledgerRows(), "no ledger row")

	res, err := svc.ReleaseLock(ctx, nil, "cancelled", stock.ChangeReleaseCancel, "t")
	require.NoError(t, err)
	assert.True(t, res.Applied, "a cancellation does not wait for the deadline")

	now.Store(deadline.UnixMicro())
	res, err = svc.ReleaseLock(ctx, expired, "unpaid", stock.ChangeReleaseTimeout, app.Operator)
	require.NoError(t, err)
	assert.True(t, res.Applied, "the same message releases once due: the early try left no claim")
	require.Len(t, res.Entries, 1)
	assert.Equal(t, string(stock.ChangeReleaseTimeout), res.Entries[0].Type)
	res, err = svc.ReleaseLock(ctx, expired, "unpaid", stock.ChangeReleaseTimeout, app.Operator)
	require.NoError(t, err)
	assert.True(t, res.Duplicate, "and only once")

	got, err = svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{OnHand: 10}, got.Quantities)
	assert.Equal(t, rowsBefore+2, ledgerRows(), "one release_cancel, one release_timeout")
	requireConsistent(t, svc)
}
