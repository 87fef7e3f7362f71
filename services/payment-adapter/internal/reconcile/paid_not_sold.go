// Package reconcile holds payment-adapter's reconciliation jobs (DESIGN §6, run by
// pkg/reconcile): payments that succeeded but that stock never sold (paid_not_sold), refunds
// the provider has not confirmed (unconfirmed_refunds) and payments whose callback never
// arrived (lost_callbacks). Each repairs through the app's use cases, the paths a message or
// a callback takes.
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
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
)

// PaidNotSold is job 2: payments still succeeded, recorded between cfg.PaidNotSoldLookback
// and cfg.PaidNotSoldAge ago, that stock did not sell — GET {StockURL}/v1/internal/orders/{id}
// names another payment (or none) as the one that sold the order, or stock never saw the
// order. Repair publishes the payment's payment.succeeded again under a new event id
// (app.RedrivePayment), so stock sells it through its normal path — or answers
// stock.sell_failed, and this service refunds the payment as it always does.
//
// A payment whose stock.sell_failed was handled is refunded, so it is not a candidate; the
// age keeps one whose events are merely in flight out of the way.
func PaidNotSold(svc *app.Service, client *http.Client, cfg config.Config) reconcile.Job {
	base := strings.TrimSuffix(cfg.StockURL, "/")
	return reconcile.Job{Name: "paid_not_sold", Interval: cfg.PaidNotSoldInterval, Run: func(ctx context.Context, mode reconcile.Mode) (reconcile.Result, error) {
		var res reconcile.Result
		now := time.Now()
		ps, err := svc.ListSucceeded(ctx, now.Add(-cfg.PaidNotSoldLookback), now.Add(-cfg.PaidNotSoldAge), cfg.ReconcileBatch)
		if err != nil {
			return res, err
		}
		res.Checked = len(ps)
		for _, p := range ps {
			var o events.StockOrder
			status, err := httpx.GetJSON(ctx, client, base+events.StockOrderPath(p.OrderID()), &o)
			f := reconcile.Finding{Kind: "paid_not_sold", IDs: map[string]string{"payment_id": p.ID(), "order_id": p.OrderID()},
				Values: map[string]int64{"amount": p.Amount()}}
			switch {
			case err != nil || (status != http.StatusOK && status != http.StatusNotFound):
				f.Kind, f.Detail = "paid_not_sold_unknown", "could not ask stock"
				f.Error = fmt.Sprintf("status %d: %v", status, err)
				res.Findings = append(res.Findings, f)
				continue
			case status == http.StatusOK && o.PaidBy == p.ID():
				continue // sold by this payment
			case status == http.StatusNotFound:
				f.Detail = "payment succeeded; stock has no record of the order"
			case o.PaidBy == "":
				f.Detail = fmt.Sprintf("payment succeeded; stock has not sold the order (locks %s)", lockStates(o.Locks))
			default:
				f.Detail = "payment succeeded; stock sold the order under payment " + o.PaidBy + " (this one must be refunded)"
			}
			if mode == reconcile.Repair {
				sent, err := svc.RedrivePayment(ctx, p.ID())
				switch {
				case err != nil:
					f.Error = err.Error()
				case sent:
					f.Repaired = true
					f.Detail += "; payment.succeeded re-published"
				default:
					f.Detail += "; the payment is no longer succeeded: nothing to re-drive"
				}
			}
			res.Findings = append(res.Findings, f)
		}
		return res, nil
	}}
}

func lockStates(locks []events.StockOrderLock) string {
	states := make([]string, len(locks))
	for i, l := range locks {
		states[i] = l.State
	}
	if len(states) == 0 {
		return "none: rejected"
	}
	return strings.Join(states, ", ")
}
