package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	pkgreconcile "github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/reconcile"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// metered is a Service on its own database whose instruments a manual reader collects.
func metered(t *testing.T, with ...app.Option) (*app.Service, *pgxpool.Pool, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(context.Background())) })
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	svc := app.NewCombining(postgres.NewStore(pool), combine.Options{}, append(with, app.WithMeterProvider(mp))...)
	t.Cleanup(svc.Close)
	return svc, pool, reader
}

// collect reads every metric r holds: name → data point attributes ("k=v,…") → value (a
// counter's or gauge's value, a histogram's count).
func collect(t *testing.T, r sdkmetric.Reader) map[string]map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]map[string]float64{}
	key := func(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			pts := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Count)
				}
			}
			out[m.Name] = pts
		}
	}
	return out
}

// A small scenario through the real use cases moves every stock metric, with its labels: the
// lock outcomes, each resolution step and outcome, the watched SKU's figures, the overdue lock
// and the oversell counter, there at 0.
func TestMetricsFollowTheUseCases(t *testing.T) {
	ctx := context.Background()
	svc, _, reader := metered(t, app.WithWatchedSKUs("MET-1", "MET-NONE"), app.WithOverdueGrace(time.Second))
	_, err := svc.CreateSKU(ctx, "MET-1", 10, "test")
	require.NoError(t, err)

	hour := time.Now().Add(time.Hour)
	lock := func(orderID, sku string, n int64, deadline time.Time) stock.LockResult {
		t.Helper()
		res, err := svc.LockForOrder(ctx, nil, orderID, []events.Line{line(sku, n)}, deadline, "test")
		require.NoError(t, err)
		return res
	}
	require.True(t, lock("o-1", "MET-1", 3, hour).Locked)
	require.True(t, lock("o-1", "MET-1", 3, hour).Duplicate)
	require.Equal(t, stock.RejectInsufficient, lock("o-2", "MET-1", 11, hour).Reason)
	require.Equal(t, stock.RejectUnknownSKU, lock("o-3", "NOPE-1", 1, hour).Reason)
	require.True(t, lock("o-late", "MET-1", 2, time.Now().Add(-time.Minute)).Locked)
	require.True(t, lock("o-4", "MET-1", 1, hour).Locked)

	resolve := func(res app.Resolution, err error) app.Resolution {
		t.Helper()
		require.NoError(t, err)
		return res
	}
	paid := &inbox.Message{Consumer: "stock-payment-succeeded", ID: "pay-1-event"}
	require.True(t, resolve(svc.SellLocked(ctx, paid, "o-1", "pay-1", "test")).Applied)
	require.True(t, resolve(svc.SellLocked(ctx, paid, "o-1", "pay-1", "test")).Duplicate)
	require.NotEmpty(t, resolve(svc.SellLocked(ctx, nil, "o-1", "pay-1", "test")).NoOp)
	require.NotEmpty(t, resolve(svc.SellLocked(ctx, nil, "o-2", "pay-2", "test")).Failed)
	require.True(t, resolve(svc.ShipOrder(ctx, nil, "o-1", "test")).Applied)
	require.True(t, resolve(svc.RefundOrder(ctx, nil, "o-1", "test")).Applied)
	require.True(t, resolve(svc.ReleaseLock(ctx, nil, "o-4", stock.ChangeReleaseCancel, "test")).Applied)
	require.NotEmpty(t, resolve(svc.ReleaseLock(ctx, nil, "o-4", stock.ChangeReleaseCancel, "test")).NoOp)

	m := collect(t, reader)
	assert.Equal(t, map[string]float64{
		"outcome=locked,reason=": 3, "outcome=duplicate,reason=": 1,
		"outcome=rejected,reason=insufficient_stock": 1, "outcome=rejected,reason=unknown_sku": 1,
	}, m["stockflow.stock.lock.outcomes"])
	assert.Equal(t, map[string]float64{"outcome=locked": 3, "outcome=duplicate": 1, "outcome=rejected": 2}, m["stockflow.stock.lock.duration"],
		"one duration per answer")
	assert.Equal(t, map[string]float64{
		"outcome=applied,step=sell": 1, "outcome=duplicate,step=sell": 1, "outcome=noop,step=sell": 1, "outcome=failed,step=sell": 1,
		"outcome=applied,step=ship": 1, "outcome=applied,step=refund": 1,
		"outcome=applied,step=release": 1, "outcome=noop,step=release": 1,
	}, m["stockflow.stock.resolve.outcomes"])
	assert.Equal(t, map[string]float64{"step=sell": 4, "step=ship": 1, "step=refund": 1, "step=release": 2}, m["stockflow.stock.resolve.duration"])

	s, err := svc.GetSKU(ctx, "MET-1")
	require.NoError(t, err)
	require.Equal(t, []int64{10, 2, 0, 8}, []int64{s.OnHand, s.Locked, s.Sold, s.Available()}, "o-late holds 2; o-1 came back, o-4 was released")
	assert.Equal(t, map[string]float64{
		"sku=MET-1,state=on_hand": float64(s.OnHand), "sku=MET-1,state=available": float64(s.Available()),
		"sku=MET-1,state=locked": float64(s.Locked), "sku=MET-1,state=sold": float64(s.Sold), "sku=MET-1,state=incoming": float64(s.Incoming),
	}, m["stockflow.stock.sku.quantity"], "a watched SKU that does not exist reports nothing")
	assert.Equal(t, map[string]float64{"": 1}, m["stockflow.stock.overdue_locks"], "o-late's lock, a minute past its deadline")
	assert.Equal(t, map[string]float64{"": 0}, m["stockflow.stock.oversell"], "exported at 0 from the start")
}

// breakSummary writes, in the test's own database, what the table's constraints forbid: SKU
// sku's summary promising more than it holds.
func breakSummary(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `ALTER TABLE sku_stock DROP CONSTRAINT sku_stock_available_check, DROP CONSTRAINT available_derived`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, sql)
	require.NoError(t, err)
}

// The oversell counter is wired to the ledger-summary job (Service.Verify): a clean run leaves
// it at 0; a summary edited by hand to lock more than is on hand makes it 1, for that SKU.
func TestOversellCountedByTheLedgerSummaryJob(t *testing.T) {
	ctx := context.Background()
	svc, pool, reader := metered(t)
	runner, err := pkgreconcile.NewRunner(pool, nil, reconcile.LedgerSummary(svc, 0))
	require.NoError(t, err)
	for _, sku := range []string{"MET-1", "MET-2"} {
		_, err := svc.CreateSKU(ctx, sku, 4, "test")
		require.NoError(t, err)
	}
	run := func() pkgreconcile.Report {
		t.Helper()
		rep, err := runner.Run(ctx, "ledger_summary", pkgreconcile.Check, "test")
		require.NoError(t, err)
		return rep
	}

	assert.Zero(t, run().Found)
	assert.Equal(t, map[string]float64{"": 0}, collect(t, reader)["stockflow.stock.oversell"], "a clean run")

	breakSummary(t, pool, `UPDATE sku_stock SET locked = 7, available = -3 WHERE sku = 'MET-1'`)
	rep := run()
	var kinds []string
	for _, f := range rep.Findings {
		kinds = append(kinds, f.Kind)
	}
	assert.Contains(t, kinds, "summary_oversell")
	assert.Equal(t, map[string]float64{"": 0, "sku=MET-1": 1}, collect(t, reader)["stockflow.stock.oversell"])
}

// A lock whose summary update the guard refuses (the stored available is below what the slot's
// figures say) fails, takes nothing, and counts an oversell sighting of its SKU.
func TestOversellCountedWhenTheSummaryGuardRefuses(t *testing.T) {
	ctx := context.Background()
	svc, pool, reader := metered(t)
	_, err := svc.CreateSKU(ctx, "MET-1", 10, "test")
	require.NoError(t, err)
	breakSummary(t, pool, `UPDATE sku_stock SET available = -1 WHERE sku = 'MET-1'`)

	_, err = svc.LockForOrder(ctx, nil, "o-1", []events.Line{line("MET-1", 1)}, time.Now().Add(time.Hour), "test")
	var refused *app.OversellError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, []string{"MET-1"}, refused.SKUs)
	locks, err := svc.Locks(ctx, "o-1")
	require.NoError(t, err)
	assert.Empty(t, locks, "nothing was taken")
	m := collect(t, reader)
	assert.Equal(t, map[string]float64{"": 0, "sku=MET-1": 1}, m["stockflow.stock.oversell"])
	assert.Empty(t, m["stockflow.stock.lock.outcomes"], "a failed lock is no outcome")
}

// TestOutcomesCountedWhenTheyCommitAfterTheCallerLeft: a caller that stops waiting (its
// context ends while the batch is blocked on the SKU's row) gets an error, but the batch still
// commits — and the counters, which follow the ledger, count it; the caller's retry counts a
// duplicate. Locks and resolutions alike.
func TestOutcomesCountedWhenTheyCommitAfterTheCallerLeft(t *testing.T) {
	ctx := context.Background()
	svc, pool, reader := metered(t)
	_, err := svc.CreateSKU(ctx, "MET-1", 10, "test")
	require.NoError(t, err)
	whileTheRowIsHeld := func(call func(context.Context) error) {
		t.Helper()
		blocker, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = blocker.Exec(ctx, `SELECT 1 FROM sku_stock WHERE sku = 'MET-1' FOR UPDATE`)
		require.NoError(t, err)
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, call(short), context.DeadlineExceeded, "the caller left while the slot row was held")
		require.NoError(t, blocker.Rollback(ctx))
	}
	counted := func(metric, point string) func() bool {
		return func() bool { return collect(t, reader)[metric][point] == 1 }
	}

	lock := func(ctx context.Context) (stock.LockResult, error) {
		return svc.LockForOrder(ctx, nil, "o-1", []events.Line{line("MET-1", 1)}, time.Now().Add(time.Hour), "test")
	}
	whileTheRowIsHeld(func(ctx context.Context) error { _, err := lock(ctx); return err })
	require.Eventually(t, counted("stockflow.stock.lock.outcomes", "outcome=locked,reason="), 10*time.Second, 20*time.Millisecond,
		"the lock that committed after its caller left is counted")
	res, err := lock(ctx)
	require.NoError(t, err)
	require.True(t, res.Duplicate)

	paid := &inbox.Message{Consumer: "stock-payment-succeeded", ID: "pay-1-event"}
	whileTheRowIsHeld(func(ctx context.Context) error {
		_, err := svc.SellLocked(ctx, paid, "o-1", "pay-1", "test")
		return err
	})
	require.Eventually(t, counted("stockflow.stock.resolve.outcomes", "outcome=applied,step=sell"), 10*time.Second, 20*time.Millisecond,
		"the sale that committed after its caller left is counted")
	sold, err := svc.SellLocked(ctx, paid, "o-1", "pay-1", "test")
	require.NoError(t, err)
	require.True(t, sold.Duplicate)

	m := collect(t, reader)
	assert.Equal(t, map[string]float64{"outcome=locked,reason=": 1, "outcome=duplicate,reason=": 1}, m["stockflow.stock.lock.outcomes"])
	assert.Equal(t, map[string]float64{"outcome=duplicate": 1}, m["stockflow.stock.lock.duration"], "only answers are timed")
	assert.Equal(t, map[string]float64{"outcome=applied,step=sell": 1, "outcome=duplicate,step=sell": 1}, m["stockflow.stock.resolve.outcomes"])
	assert.Equal(t, map[string]float64{"step=sell": 1}, m["stockflow.stock.resolve.duration"], "only answers are timed")
}
