package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/timeout/internal/app"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
	timeoutpg "github.com/stockflow/stockflow/services/timeout/internal/postgres"
)

func TestMain(m *testing.M) {
	otel.SetTextMapPropagator(telemetry.Propagator()) // as telemetry.Setup does in the service
	os.Exit(m.Run())
}

type env struct {
	t         *testing.T
	pool      *pgxpool.Pool
	svc       *app.Service
	mu        sync.Mutex
	cancelled []string
}

func setup(t *testing.T, batch int) *env {
	t.Helper()
	pool, _ := pgtest.New(t, timeoutpg.Schemas()...)
	e := &env{t: t, pool: pool}
	cancel := func(_ context.Context, orderID string) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.cancelled = append(e.cancelled, orderID)
		return nil
	}
	e.svc = app.New(timeoutpg.New(pool), cancel, slog.New(slog.DiscardHandler), batch)
	t.Cleanup(e.svc.Close)
	return e
}

func (e *env) lock(orderID string, at time.Time) {
	e.t.Helper()
	ev := events.StockLocked{OrderID: orderID, Lines: []events.Line{{SKU: "S", Qty: 1}}, PaymentDeadline: at}
	require.NoError(e.t, e.svc.ScheduleDeadline(context.Background(), inbox.Message{Consumer: "timeout-stock-locked", ID: "locked-" + orderID}, ev))
}

// outbox counts outbox rows by subject prefix.
func (e *env) outbox(subject string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE subject LIKE $1 || '%'`, subject).Scan(&n))
	return n
}

func TestScheduleWritesTheScheduleMessageOnce(t *testing.T) {
	e := setup(t, 10)
	at := time.Date(2030, 1, 1, 10, 0, 0, 250_000_000, time.UTC)
	e.lock("ord-1", at)
	e.lock("ord-1", at) // redelivery: inbox
	require.NoError(t, e.svc.ScheduleDeadline(context.Background(), inbox.Message{Consumer: "timeout-stock-locked", ID: "other"},
		events.StockLocked{OrderID: "ord-1", Lines: []events.Line{{SKU: "S", Qty: 1}}, PaymentDeadline: at.Add(time.Hour)})) // another event: the PK

	var subject string
	var headers map[string]string
	var data []byte
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT subject, headers, data FROM outbox`).Scan(&subject, &headers, &data))
	assert.Equal(t, natsx.ScheduleSubject("ord-1"), subject)
	assert.Equal(t, "@at 2030-01-01T10:00:01Z", headers[natsx.HeaderSchedule], "rounded up: never fires early")
	assert.Equal(t, natsx.FireSubject("ord-1"), headers[natsx.HeaderScheduleTarget])
	orderID, err := app.DecodeFired(natsx.FireSubject("ord-1"), data)
	require.NoError(t, err)
	assert.Equal(t, "ord-1", orderID)
	_, err = app.DecodeFired(natsx.FireSubject("ord-2"), data)
	assert.ErrorIs(t, err, events.ErrMalformed, "a body for another order")

	d, err := e.svc.Get(context.Background(), "ord-1")
	require.NoError(t, err)
	assert.True(t, d.At().Equal(at), "the first deadline stands")
}

func TestFireBeforeTheDeadlineIsRetried(t *testing.T) {
	e := setup(t, 10)
	e.lock("ord-1", time.Now().Add(time.Hour))
	err := e.svc.Fire(context.Background(), "ord-1")
	assert.ErrorIs(t, err, deadline.ErrNotDue)
	assert.Zero(t, e.outbox(events.SubjectTimeoutExpired))
}

func TestFireForUnknownOrResolvedDeadlineIsANoOp(t *testing.T) {
	e := setup(t, 10)
	require.NoError(t, e.svc.Fire(context.Background(), "ord-unknown"))
	e.lock("ord-1", time.Now().Add(-time.Second))
	require.NoError(t, e.svc.Resolve(context.Background(), inbox.Message{Consumer: "c", ID: "sold-1"}, "ord-1", deadline.ResolutionSold))
	require.NoError(t, e.svc.Fire(context.Background(), "ord-1"))
	assert.Zero(t, e.outbox(events.SubjectTimeoutExpired))
	assert.Equal(t, []string{"ord-1"}, e.cancelled, "the schedule of a cancelled deadline is removed")
}

func TestResolveTwiceOrAfterExpiryChangesNothing(t *testing.T) {
	e := setup(t, 10)
	ctx := context.Background()
	e.lock("ord-1", time.Now().Add(-time.Second))
	require.NoError(t, e.svc.Fire(ctx, "ord-1"))
	require.NoError(t, e.svc.Resolve(ctx, inbox.Message{Consumer: "c", ID: "released-1"}, "ord-1", deadline.ResolutionReleased))
	d, err := e.svc.Get(ctx, "ord-1")
	require.NoError(t, err)
	assert.Equal(t, deadline.Expired, d.State())
	assert.Empty(t, e.cancelled, "nothing to cancel once expired")
	assert.Equal(t, 1, e.outbox(events.SubjectTimeoutExpired))
}

// TestFireAndSweepRaceExpireEachDeadlineOnce: many fires and several sweepers over the same
// overdue deadlines at once — each deadline expires exactly once, one timeout.expired each.
func TestFireAndSweepRaceExpireEachDeadlineOnce(t *testing.T) {
	e := setup(t, 7)
	const n = 60
	for i := range n {
		e.lock(fmt.Sprintf("ord-%02d", i), time.Now().Add(-time.Duration(i)*time.Millisecond))
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	swept := make(chan int, 4)
	for range 4 {
		wg.Go(func() {
			k, err := e.svc.Sweep(ctx)
			assert.NoError(t, err)
			swept <- k
		})
	}
	for i := range n {
		wg.Go(func() { assert.NoError(t, e.svc.Fire(ctx, fmt.Sprintf("ord-%02d", i))) })
	}
	wg.Wait()
	close(swept)
	total := 0
	for k := range swept {
		total += k
	}
	assert.LessOrEqual(t, total, n)
	assert.Equal(t, n, e.outbox(events.SubjectTimeoutExpired), "one timeout.expired per deadline")
	var scheduled int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM deadlines WHERE state <> 'expired'`).Scan(&scheduled))
	assert.Zero(t, scheduled)
}

func TestSweepTakesOnlyDueDeadlinesInBatches(t *testing.T) {
	e := setup(t, 3)
	for i := range 10 {
		e.lock(fmt.Sprintf("due-%d", i), time.Now().Add(-time.Minute))
	}
	e.lock("later", time.Now().Add(time.Hour))
	n, err := e.svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	n, err = e.svc.Sweep(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n)
	d, err := e.svc.Get(context.Background(), "later")
	require.NoError(t, err)
	assert.Equal(t, deadline.Scheduled, d.State())
}

// TestConcurrentSchedulesShareATransactionEachWithItsOwnRows: stock.locked handled at once
// are stored in few transactions, yet each order gets its own deadline and schedule carrying
// its own trace; redeliveries and a second stock.locked of an order in the same rush write
// nothing more.
func TestConcurrentSchedulesShareATransactionEachWithItsOwnRows(t *testing.T) {
	e := setup(t, 10)
	const n = 100
	at := time.Now().Add(time.Hour)
	traceparent := func(i int) string { return fmt.Sprintf("00-%032x-%016x-01", i+1, i+1) }
	var wg sync.WaitGroup
	for i := range n {
		ctx := telemetry.WithTraceparent(context.Background(), traceparent(i))
		order := fmt.Sprintf("ord-%03d", i)
		ev := events.StockLocked{OrderID: order, Lines: []events.Line{{SKU: "S", Qty: 1}}, PaymentDeadline: at}
		schedule := func(id string) {
			assert.NoError(t, e.svc.ScheduleDeadline(ctx, inbox.Message{Consumer: "timeout-stock-locked", ID: id}, ev))
		}
		wg.Go(func() { schedule("locked-" + order) })
		if i%10 == 0 {
			wg.Go(func() { schedule("locked-" + order) })  // redelivered
			wg.Go(func() { schedule("another-" + order) }) // another event for the same order
		}
	}
	wg.Wait()

	ctx := context.Background()
	var rows, transactions int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM deadlines`).Scan(&rows, &transactions))
	assert.Equal(t, n, rows)
	assert.Less(t, transactions, n/2, "schedules handled at once share transactions")
	assert.Equal(t, n, e.outbox(natsx.SubjectSchedulePrefix), "one schedule per order")
	var claims int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM inbox`).Scan(&claims))
	assert.Equal(t, n+n/10, claims, "every distinct message claimed once")
	for i := range n {
		var stored, sent string
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT d.traceparent, o.headers->>'traceparent' FROM deadlines d JOIN outbox o ON o.subject = $2
			WHERE d.order_id = $1`, fmt.Sprintf("ord-%03d", i), natsx.ScheduleSubject(fmt.Sprintf("ord-%03d", i))).Scan(&stored, &sent))
		assert.Equal(t, traceparent(i), stored, "the deadline row keeps its own caller's trace")
		assert.Equal(t, traceparent(i), sent, "the schedule carries its own caller's trace")
	}
}

// TestOfAnOrderGivenTwiceInOneInsertTheFirstIsStored: two stock.locked of one order in the
// same batch — the one that came first sets the deadline, whatever order the rows are
// inserted in.
func TestOfAnOrderGivenTwiceInOneInsertTheFirstIsStored(t *testing.T) {
	e := setup(t, 10)
	ctx := context.Background()
	const n = 200
	first, second := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC)
	var ds []app.Traced
	for k := range 2 {
		for i := range n {
			at := first
			if k == 1 {
				at = second
			}
			d, err := deadline.Schedule(fmt.Sprintf("ord-%03d", (i*7)%n), at, first.Add(-time.Hour))
			require.NoError(t, err)
			ds = append(ds, app.Traced{Deadline: d})
		}
	}
	var inserted []bool
	_, err := timeoutpg.New(e.pool).Within(ctx, nil, func(tx app.Tx) ([]events.Message, error) {
		var err error
		inserted, err = tx.Insert(ctx, ds)
		return nil, err
	})
	require.NoError(t, err)
	for i, ok := range inserted {
		assert.Equal(t, i < n, ok, "row %d", i)
	}
	var late int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM deadlines WHERE deadline <> $1`, first).Scan(&late))
	assert.Zero(t, late, "every order keeps the deadline given first")
}

// TestConcurrentResolutionsShareATransactionAndCancelEachScheduleOnce: stock.sold and
// stock.released handled at once — for scheduled orders, for orders not known yet, redelivered,
// and both for one order — share transactions; each scheduled deadline is cancelled by the
// first resolution and its schedule removed once, an unknown order gets a cancelled row.
func TestConcurrentResolutionsShareATransactionAndCancelEachScheduleOnce(t *testing.T) {
	e := setup(t, 10)
	const n = 60
	for i := range n {
		e.lock(fmt.Sprintf("ord-%02d", i), time.Now().Add(time.Hour))
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	resolve := func(id, order, resolution string) {
		wg.Go(func() {
			assert.NoError(t, e.svc.Resolve(ctx, inbox.Message{Consumer: "timeout-stock-resolved", ID: id}, order, resolution))
		})
	}
	for i := range n {
		order := fmt.Sprintf("ord-%02d", i)
		resolve("sold-"+order, order, deadline.ResolutionSold)
		if i%6 == 0 {
			resolve("sold-"+order, order, deadline.ResolutionSold)         // redelivered
			resolve("released-"+order, order, deadline.ResolutionReleased) // the other outcome of the same order
		}
		if i%3 == 0 {
			resolve("released-new-"+order, "new-"+order, deadline.ResolutionReleased) // overtakes its stock.locked
		}
	}
	wg.Wait()

	e.mu.Lock()
	cancelled := append([]string(nil), e.cancelled...)
	e.mu.Unlock()
	assert.Len(t, cancelled, n, "each scheduled deadline's schedule is removed once")
	assert.ElementsMatch(t, cancelled, func() []string {
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("ord-%02d", i))
		}
		return ids
	}())
	var rows, transactions, early int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM deadlines WHERE order_id LIKE 'ord-%' AND state = 'cancelled'`).
		Scan(&rows, &transactions))
	assert.Equal(t, n, rows, "every scheduled deadline cancelled")
	assert.Less(t, transactions, n/2, "resolutions handled at once share transactions")
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM deadlines WHERE order_id LIKE 'new-%' AND state = 'cancelled' AND resolution = 'released'`).Scan(&early))
	assert.Equal(t, n/3, early, "an order resolved before its lock gets a cancelled row")

	e.lock("new-ord-00", time.Now().Add(time.Hour))
	d, err := e.svc.Get(ctx, "new-ord-00")
	require.NoError(t, err)
	assert.Equal(t, deadline.Cancelled, d.State(), "its late stock.locked schedules nothing")
}

// TestConcurrentFiresShareATransactionAndANotDueOneFailsAlone: fired schedules handled at once
// — due, fired twice, for an unknown order, and one before its deadline — share transactions;
// each due deadline expires once with one timeout.expired carrying its own fire's trace, and
// only the early fire fails (to be retried when due).
func TestConcurrentFiresShareATransactionAndANotDueOneFailsAlone(t *testing.T) {
	e := setup(t, 10)
	const n = 60
	for i := range n {
		e.lock(fmt.Sprintf("ord-%02d", i), time.Now().Add(-time.Second))
	}
	e.lock("later", time.Now().Add(time.Hour))
	traceparent := func(i int) string { return fmt.Sprintf("00-%032x-%016x-01", i+1, i+1) }
	var wg sync.WaitGroup
	var early error
	for i := range n {
		ctx := telemetry.WithTraceparent(context.Background(), traceparent(i))
		fire := func() { assert.NoError(t, e.svc.Fire(ctx, fmt.Sprintf("ord-%02d", i))) }
		wg.Go(fire)
		if i%10 == 0 {
			wg.Go(fire) // redelivered
			wg.Go(func() { assert.NoError(t, e.svc.Fire(ctx, fmt.Sprintf("unknown-%02d", i))) })
		}
	}
	wg.Go(func() { early = e.svc.Fire(context.Background(), "later") })
	wg.Wait()

	assert.ErrorIs(t, early, deadline.ErrNotDue)
	ctx := context.Background()
	var rows, transactions int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM deadlines WHERE state = 'expired'`).
		Scan(&rows, &transactions))
	assert.Equal(t, n, rows)
	assert.Less(t, transactions, n/2, "fires handled at once share transactions")
	assert.Equal(t, n, e.outbox(events.SubjectTimeoutExpired), "one timeout.expired per deadline")
	for i := range n {
		var sent string
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT headers->>'traceparent' FROM outbox WHERE event_id = $1`,
			"timeout-expired:"+fmt.Sprintf("ord-%02d", i)).Scan(&sent))
		assert.Equal(t, traceparent(i), sent, "timeout.expired carries its own fire's trace")
	}
	d, err := e.svc.Get(ctx, "later")
	require.NoError(t, err)
	assert.Equal(t, deadline.Scheduled, d.State())
}
