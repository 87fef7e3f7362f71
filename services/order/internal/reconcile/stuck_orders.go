// Package reconcile holds the order service's reconciliation job (DESIGN §6, run by
// pkg/reconcile): orders stuck in pending or awaiting_payment long after their deadline.
package reconcile

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/config"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// StuckOrders is job 4: orders still pending or awaiting_payment more than cfg.StuckOrdersGrace
// after their payment deadline. Stock owns what happened to the stock, so the job asks it
// (GET {StockURL}/v1/internal/orders/{id}) and, repairing, applies the outcome the order
// missed through the same transition its event would have made (app.Service.Reconcile):
//
//	stock rejected the order      → rejected      (stock.lock_rejected was missed)
//	locks sold                    → paid          (stock.sold)
//	locks released                → closed, or cancelled when a cancel was requested (stock.released)
//	locks held, order pending     → awaiting_payment (stock.locked); stock's overdue sweep releases them
//	locks held, awaiting_payment  → reported only: stock's overdue-lock job releases them
//	stock never saw a pending order → order.created re-published (new event id), at most
//	                                   once per cfg.StuckOrdersGrace
//
// See docs/decisions/0003-reconciliation.md.
func StuckOrders(svc *app.Service, client *http.Client, cfg config.Config) reconcile.Job {
	base := strings.TrimSuffix(cfg.StockURL, "/")
	return reconcile.Job{Name: "stuck_orders", Interval: cfg.StuckOrdersInterval, Run: func(ctx context.Context, mode reconcile.Mode) (reconcile.Result, error) {
		var res reconcile.Result
		orders, err := svc.ListStuck(ctx, time.Now().Add(-cfg.StuckOrdersGrace), cfg.ReconcileBatch)
		if err != nil {
			return res, err
		}
		res.Checked = len(orders)
		for _, o := range orders {
			var so events.StockOrder
			status, code, err := httpx.GetJSON(ctx, client, base+events.StockOrderPath(o.ID()), &so)
			f := reconcile.Finding{Kind: "stuck_order", IDs: map[string]string{"order_id": o.ID()},
				Detail: fmt.Sprintf("%s %s past its payment deadline", o.Status(), time.Since(o.ExpiresAt()).Round(time.Second))}
			unknown := events.NoSuchOrder(status, code)
			if err != nil || (status != http.StatusOK && !unknown) {
				f.Error = fmt.Sprintf("could not ask stock: status %d %s: %v", status, code, err)
				res.Findings = append(res.Findings, f)
				continue
			}
			what, apply := derive(o, unknown, so, cfg.StuckOrdersGrace)
			f.Detail += "; stock: " + what
			if mode == reconcile.Repair && apply != nil {
				f.Repaired, f.Error = apply(ctx, svc, o.ID())
			}
			res.Findings = append(res.Findings, f)
		}
		return res, nil
	}}
}

// repair applies one derived outcome and says whether it changed the order.
type repair func(ctx context.Context, svc *app.Service, orderID string) (bool, string)

// derive says what stock's record means for a stuck order and how to apply it (nil: nothing
// this service can do, or nothing yet). A re-published order.created gets the grace its first
// copy got before it is sent again.
func derive(o *order.Order, unknown bool, so events.StockOrder, grace time.Duration) (string, repair) {
	if unknown {
		if o.Status() != order.Pending {
			return "no record of an order it reported locked; needs a human", nil
		}
		now := time.Now()
		if n, last, waiting := o.RepublishWaiting(now, grace); waiting {
			return fmt.Sprintf("no record of the order; copy %d of order.created sent %s ago, within the grace", n, now.Sub(last).Round(time.Second)), nil
		}
		return "no record of the order → order.created re-published", func(ctx context.Context, svc *app.Service, id string) (bool, string) {
			sent, err := svc.RepublishCreated(ctx, id, grace)
			return sent, errText(err)
		}
	}
	if so.Outcome == "rejected" {
		reason := so.RejectReason
		if so.RejectSKU != "" {
			reason += " (" + so.RejectSKU + ")"
		}
		return "rejected " + reason + " → rejected", follow("stock.lock_rejected", func(o *order.Order, at time.Time) (bool, error) {
			return o.StockLockRejected(at, reason)
		})
	}
	state := ""
	if len(so.Locks) > 0 {
		state = so.Locks[0].State // an order's locks resolve together
	}
	switch {
	case state == "sold":
		return "locks sold → paid", follow("stock.sold", func(o *order.Order, at time.Time) (bool, error) { return o.StockSold(at, false) })
	case state == "released":
		// What reached the locks first decides, as stock.released says; a cancel request
		// does not: the deadline may have won (a stock of before released_by: the request).
		why, err := order.ParseReleaseReason(so.ReleasedBy)
		if err != nil {
			why = order.ReleaseTimeout
			if !o.CancelRequestedAt().IsZero() {
				why = order.ReleaseCancel
			}
		}
		return "locks released → " + map[order.ReleaseReason]string{order.ReleaseTimeout: "closed", order.ReleaseCancel: "cancelled"}[why],
			follow("stock.released", func(o *order.Order, at time.Time) (bool, error) { return o.StockReleased(at, why) })
	case state == "locked" && o.Status() == order.Pending:
		return "locks held → awaiting_payment", follow("stock.locked", func(o *order.Order, at time.Time) (bool, error) { return o.StockLocked(at) })
	case state == "locked":
		return "locks still held; stock's overdue_locks job releases them", nil
	}
	return "locks " + state + "; needs a human", nil
}

func follow(what string, apply app.Apply) repair {
	return func(ctx context.Context, svc *app.Service, id string) (bool, string) {
		r, err := svc.Reconcile(ctx, id, what+" (reconciled)", apply)
		if err == nil && r != app.Applied {
			return false, "not applied: " + string(r)
		}
		return err == nil, errText(err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
