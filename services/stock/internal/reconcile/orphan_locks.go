package reconcile

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// terminal are the order statuses in which an order must hold no lock: it was closed at its
// deadline, cancelled or rejected, so stock should have released (or never taken) its locks.
var terminal = map[string]bool{"closed": true, "cancelled": true, "rejected": true}

// OrphanLocks is job 3, the after-the-flash-sale sweep: locks held for more than age whose
// order the order service does not know (404 order_not_found) or has closed, cancelled or rejected are
// released as cancellations (release_cancel rows, stock.released with reason cancel), up to
// batch orders a run. It asks GET {orderURL}/v1/orders/{id}; an order it cannot ask about
// (the order service down, or a 404 without order_not_found: a wrong orderURL answered
// route_not_found) is reported with the error and left alone.
func OrphanLocks(svc *app.Service, client *http.Client, orderURL string, interval, age time.Duration, batch int) reconcile.Job {
	base := strings.TrimSuffix(orderURL, "/")
	return reconcile.Job{Name: "orphan_locks", Interval: interval, Run: func(ctx context.Context, mode reconcile.Mode) (reconcile.Result, error) {
		n, orders, err := svc.HeldOrders(ctx, time.Now().Add(-age), batch)
		res := reconcile.Result{Checked: n}
		if err != nil {
			return res, err
		}
		for _, id := range orders {
			var o struct {
				Status string `json:"status"`
			}
			status, code, err := httpx.GetJSON(ctx, client, base+"/v1/orders/"+url.PathEscape(id), &o)
			f := reconcile.Finding{Kind: "orphan_lock", IDs: map[string]string{"order_id": id}}
			switch {
			case err != nil:
				f.Kind, f.Detail, f.Error = "orphan_lock_unknown", "could not ask the order service", err.Error()
			case events.NoSuchOrder(status, code):
				f.Detail = "locks held for an order the order service does not know"
			case status != http.StatusOK:
				f.Kind, f.Detail, f.Error = "orphan_lock_unknown", "could not ask the order service", fmt.Sprintf("status %d %s", status, code)
			case terminal[o.Status]:
				f.Detail = "locks held for an order that is " + o.Status
			default:
				continue // the order is open: its locks are rightly held
			}
			if mode == reconcile.Repair && f.Error == "" {
				release(ctx, svc, &f, id, stock.ChangeReleaseCancel)
			}
			res.Findings = append(res.Findings, f)
		}
		return res, nil
	}}
}
