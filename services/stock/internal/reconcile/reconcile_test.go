package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	pkgreconcile "github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	stockpg "github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/reconcile"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

func setup(t *testing.T, jobs func(*app.Service) []pkgreconcile.Job) (*app.Service, *pgxpool.Pool, *pkgreconcile.Runner) {
	t.Helper()
	pool, _ := pgtest.New(t, service.Schemas(stockpg.Schema)...)
	svc := app.New(stockpg.NewStore(pool))
	r, err := pkgreconcile.NewRunner(pool, nil, jobs(svc)...)
	require.NoError(t, err)
	return svc, pool, r
}

func lock(t *testing.T, svc *app.Service, orderID, sku string, n int64, deadline time.Time) {
	t.Helper()
	res, err := svc.LockForOrder(context.Background(), nil, orderID, []events.Line{{SKU: sku, Qty: n}}, deadline, "test")
	require.NoError(t, err)
	require.True(t, res.Locked)
}

func run(t *testing.T, r *pkgreconcile.Runner, job string, mode pkgreconcile.Mode) pkgreconcile.Report {
	t.Helper()
	rep, err := r.Run(context.Background(), job, mode, "test")
	require.NoError(t, err)
	return rep
}

func orderIDs(fs []pkgreconcile.Finding) []string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.IDs["order_id"])
	}
	return ids
}

// requireAddsUp checks the SKU's figures and that the ledger fold equals every summary.
func requireAddsUp(t *testing.T, svc *app.Service, sku string, onHand, locked, sold int64) {
	t.Helper()
	s, err := svc.GetSKU(context.Background(), sku)
	require.NoError(t, err)
	assert.Equal(t, []int64{onHand, locked, sold, onHand - locked - sold}, []int64{s.OnHand, s.Locked, s.Sold, s.Available()})
	diffs, err := svc.Verify(context.Background())
	require.NoError(t, err)
	assert.Empty(t, diffs)
}

func outboxSubjects(t *testing.T, pool *pgxpool.Pool, orderID string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT subject FROM outbox WHERE convert_from(data, 'UTF8')::jsonb->'data'->>'order_id' = $1 ORDER BY id`, orderID)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// The timeout never arrives (no timeout service runs, its timer is gone): the overdue lock is
// found, released as a timeout with a ledger row and stock.released, and then gone.
func TestOverdueLocksReleasesWhatTheTimerMissed(t *testing.T) {
	svc, pool, r := setup(t, func(svc *app.Service) []pkgreconcile.Job {
		return []pkgreconcile.Job{reconcile.OverdueLocks(svc, 0, 0, 100)}
	})
	ctx := context.Background()
	_, err := svc.CreateSKU(ctx, "CUP-1", 10, "test")
	require.NoError(t, err)
	lock(t, svc, "o-late", "CUP-1", 3, time.Now().Add(-time.Minute))
	lock(t, svc, "o-open", "CUP-1", 2, time.Now().Add(time.Hour))

	check := run(t, r, "overdue_locks", pkgreconcile.Check)
	assert.Equal(t, []string{"o-late"}, orderIDs(check.Findings))
	assert.Zero(t, check.Repaired)
	requireAddsUp(t, svc, "CUP-1", 10, 5, 0)

	repair := run(t, r, "overdue_locks", pkgreconcile.Repair)
	assert.Equal(t, []string{"o-late"}, orderIDs(repair.Findings))
	assert.Equal(t, 1, repair.Repaired)
	requireAddsUp(t, svc, "CUP-1", 10, 2, 0)
	ledger, err := svc.Ledger(ctx, "CUP-1", app.LedgerQuery{Limit: 100})
	require.NoError(t, err)
	last := ledger[len(ledger)-1]
	assert.Equal(t, []any{stock.ChangeReleaseTimeout, "o-late", reconcile.Operator}, []any{last.Type, last.OrderID, last.Operator})
	assert.Equal(t, []string{events.SubjectStockLocked, events.SubjectStockReleased}, outboxSubjects(t, pool, "o-late"))

	again := run(t, r, "overdue_locks", pkgreconcile.Check)
	assert.Zero(t, again.Found)
	locks, err := svc.Locks(ctx, "o-open")
	require.NoError(t, err)
	assert.Equal(t, stock.StateLocked, locks[0].State(), "a lock within its deadline is left alone")
}

// Two replicas trigger the sweep at the same moment: every overdue lock is released exactly
// once, by whichever run got the job's lock.
func TestOverdueLocksTwoTriggersReleaseOnce(t *testing.T) {
	svc, pool, r := setup(t, func(svc *app.Service) []pkgreconcile.Job {
		return []pkgreconcile.Job{reconcile.OverdueLocks(svc, 0, 0, 100)}
	})
	ctx := context.Background()
	_, err := svc.CreateSKU(ctx, "CUP-1", 100, "test")
	require.NoError(t, err)
	for i := range 40 {
		lock(t, svc, fmt.Sprintf("o-%d", i), "CUP-1", 1, time.Now().Add(-time.Minute))
	}
	var wg sync.WaitGroup
	reps := make([]pkgreconcile.Report, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { reps[i], errs[i] = r.Run(ctx, "overdue_locks", pkgreconcile.Repair, fmt.Sprint("replica-", i)) })
	}
	wg.Wait()
	repaired := 0
	for i := range 2 {
		if errs[i] != nil {
			require.ErrorIs(t, errs[i], pkgreconcile.ErrAlreadyRunning)
			continue
		}
		repaired += reps[i].Repaired
	}
	assert.Equal(t, 40, repaired)
	assert.True(t, errors.Is(errs[0], pkgreconcile.ErrAlreadyRunning) || errors.Is(errs[1], pkgreconcile.ErrAlreadyRunning) ||
		reps[0].Found == 0 || reps[1].Found == 0, "the runs did not overlap: one came after and found nothing")
	var releases int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM stock_ledger WHERE change_type = 'release_timeout'`).Scan(&releases))
	assert.Equal(t, 40, releases)
	requireAddsUp(t, svc, "CUP-1", 100, 0, 0)
}

// A summary row edited by hand, the ledger intact: the difference is reported with both
// figures, repair rebuilds the summary from the ledger, and then all is consistent.
func TestLedgerSummaryRebuildsAHandEditedSummary(t *testing.T) {
	svc, pool, r := setup(t, func(svc *app.Service) []pkgreconcile.Job {
		return []pkgreconcile.Job{reconcile.LedgerSummary(svc, 0)}
	})
	ctx := context.Background()
	for _, sku := range []string{"CUP-1", "MUG-1"} {
		_, err := svc.CreateSKU(ctx, sku, 100, "test")
		require.NoError(t, err)
	}
	lock(t, svc, "o-1", "CUP-1", 4, time.Now().Add(time.Hour))
	_, err := pool.Exec(ctx, `UPDATE sku_stock SET on_hand = on_hand + 7, available = available + 7 WHERE sku = 'CUP-1'`)
	require.NoError(t, err)

	check := run(t, r, "ledger_summary", pkgreconcile.Check)
	assert.Equal(t, 2, check.Checked)
	require.Len(t, check.Findings, 1)
	f := check.Findings[0]
	assert.Equal(t, "summary_ledger_fold", f.Kind)
	assert.Equal(t, map[string]string{"sku": "CUP-1", "field": "on_hand"}, f.IDs)
	assert.Equal(t, map[string]int64{"summary": 107, "expected": 100}, f.Values)
	assert.False(t, f.Repaired)

	repair := run(t, r, "ledger_summary", pkgreconcile.Repair)
	assert.Equal(t, 1, repair.Found)
	assert.Equal(t, 1, repair.Repaired)
	assert.Zero(t, run(t, r, "ledger_summary", pkgreconcile.Check).Found)
	requireAddsUp(t, svc, "CUP-1", 100, 4, 0)
	requireAddsUp(t, svc, "MUG-1", 100, 0, 0)
}

// A lock row that disagrees with the ledger is not something a rebuild can fix: it stays a
// finding, not repaired.
func TestLedgerSummaryLeavesWhatARebuildCannotFix(t *testing.T) {
	svc, pool, r := setup(t, func(svc *app.Service) []pkgreconcile.Job {
		return []pkgreconcile.Job{reconcile.LedgerSummary(svc, 0)}
	})
	ctx := context.Background()
	_, err := svc.CreateSKU(ctx, "CUP-1", 100, "test")
	require.NoError(t, err)
	lock(t, svc, "o-1", "CUP-1", 4, time.Now().Add(time.Hour))
	_, err = pool.Exec(ctx, `UPDATE stock_lock SET qty = 5 WHERE order_id = 'o-1'`)
	require.NoError(t, err)
	rep := run(t, r, "ledger_summary", pkgreconcile.Repair)
	require.Len(t, rep.Findings, 1)
	assert.Equal(t, "summary_locks", rep.Findings[0].Kind)
	assert.False(t, rep.Findings[0].Repaired)
}

// orphan_locks releases the locks of an order only on the order service's own word that it
// has no such order (404 order_not_found). A 404 without that code — a wrong STOCK_ORDER_URL
// answered by the order service's route_not_found, a proxy's plain page — is reported as
// unknown and releases nothing.
func TestOrphanLocksReleasesOnlyOrdersTheOrderServiceDoesNotKnow(t *testing.T) {
	orderService := http.NewServeMux()
	orderService.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "o-ghost" {
			httpx.WriteError(w, httpx.Errorf(http.StatusNotFound, events.OrderNotFound, "no order"))
			return
		}
		_, _ = w.Write([]byte(`{"status":"awaiting_payment"}`))
	})
	routeNotFound := http.NewServeMux()
	httpx.NotFound(routeNotFound)
	for _, c := range []struct {
		name     string
		handler  http.Handler
		released []string
	}{
		{"the order service", orderService, []string{"o-ghost"}},
		{"a wrong base path (route_not_found)", routeNotFound, nil},
		{"a proxy's plain 404", http.NotFoundHandler(), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			t.Cleanup(srv.Close)
			svc, _, r := setup(t, func(svc *app.Service) []pkgreconcile.Job {
				return []pkgreconcile.Job{reconcile.OrphanLocks(svc, srv.Client(), srv.URL, 0, 0, 100)}
			})
			ctx := context.Background()
			_, err := svc.CreateSKU(ctx, "CUP-1", 10, "test")
			require.NoError(t, err)
			lock(t, svc, "o-ghost", "CUP-1", 3, time.Now().Add(time.Hour))
			lock(t, svc, "o-open", "CUP-1", 2, time.Now().Add(time.Hour))

			repair := run(t, r, "orphan_locks", pkgreconcile.Repair)
			assert.Equal(t, len(c.released), repair.Repaired)
			var released []string
			for _, id := range []string{"o-ghost", "o-open"} {
				locks, err := svc.Locks(ctx, id)
				require.NoError(t, err)
				if locks[0].State() == stock.StateReleased {
					released = append(released, id)
				}
			}
			assert.Equal(t, c.released, released)
			if c.released == nil {
				require.Len(t, repair.Findings, 2, "each held order is reported")
				for _, f := range repair.Findings {
					assert.Equal(t, "orphan_lock_unknown", f.Kind)
					assert.Contains(t, f.Error, "status 404")
				}
			}
			requireAddsUp(t, svc, "CUP-1", 10, 5-int64(3*len(c.released)), 0)
		})
	}
}
