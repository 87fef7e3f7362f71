package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// OverdueLocks is job 1: locks still held more than grace past their deadline — the timeout
// service's scheduled message and sweeper both missed them — are released as timeouts
// (release_timeout rows, stock.released with reason timeout), up to batch orders a run.
func OverdueLocks(svc *app.Service, interval, grace time.Duration, batch int) reconcile.Job {
	return reconcile.Job{Name: "overdue_locks", Interval: interval, Run: func(ctx context.Context, mode reconcile.Mode) (reconcile.Result, error) {
		n, orders, err := svc.OverdueLocks(ctx, svc.Now().Add(-grace), batch)
		res := reconcile.Result{Checked: n}
		if err != nil {
			return res, err
		}
		for _, id := range orders {
			f := reconcile.Finding{Kind: "overdue_lock", IDs: map[string]string{"order_id": id},
				Detail: fmt.Sprintf("locks held more than %s past the payment deadline", grace)}
			if mode == reconcile.Repair {
				release(ctx, svc, &f, id, stock.ChangeReleaseTimeout)
			}
			res.Findings = append(res.Findings, f)
		}
		return res, nil
	}}
}

// release releases an order's held locks through the use case and records the outcome in f.
func release(ctx context.Context, svc *app.Service, f *reconcile.Finding, orderID string, why stock.ChangeType) {
	r, err := svc.ReleaseLock(ctx, nil, orderID, why, Operator)
	switch {
	case err != nil:
		f.Error = err.Error()
	case r.Applied:
		f.Repaired = true
		f.Detail += fmt.Sprintf("; released (%s, %d ledger rows)", why, len(r.Entries))
	default:
		f.Detail += "; nothing to release: " + r.NoOp // resolved meanwhile by its event
	}
}
