// Package reconcile holds payment-adapter's reconciliation jobs (DESIGN §6, run by
// pkg/reconcile): payments that succeeded but that stock never sold (paid_not_sold), refunds
// the provider has not confirmed (unconfirmed_refunds) and payments whose callback never
// arrived (lost_callbacks). Each repairs through the app's use cases, the paths a message or
// a callback takes.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// PaidNotSold is job 2: payments still succeeded, recorded between cfg.PaidNotSoldLookback
// and cfg.PaidNotSoldAge ago, that stock did not sell — GET {StockURL}/v1/internal/orders/{id}
// names another payment (or none) as the one that sold the order, or stock never saw the
// order. Repair publishes the payment's payment.succeeded again under a new event id
// (app.RedrivePayment), so stock sells it through its normal path — or answers
// stock.sell_failed, and this service refunds the payment as it always does. A payment gets
// at most one copy per cfg.PaidNotSoldAge, the time its first event got: while stock is
// down the job reports the copy it sent instead of sending one on every run.
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
			status, code, err := httpx.GetJSON(ctx, client, base+events.StockOrderPath(p.OrderID()), &o)
			f := reconcile.Finding{Kind: "paid_not_sold", IDs: map[string]string{"payment_id": p.ID(), "order_id": p.OrderID()},
				Values: map[string]int64{"amount": p.Amount()}}
			unknown := events.NoSuchOrder(status, code)
			switch {
			case err != nil || (status != http.StatusOK && !unknown):
				f.Kind, f.Detail = "paid_not_sold_unknown", "could not ask stock"
				f.Error = fmt.Sprintf("status %d %s: %v", status, code, err)
				res.Findings = append(res.Findings, f)
				continue
			case status == http.StatusOK && o.PaidBy == p.ID():
				continue // sold by this payment
			case unknown:
				f.Detail = "payment succeeded; stock has no record of the order"
			case o.PaidBy == "":
				f.Detail = fmt.Sprintf("payment succeeded; stock has not sold the order (locks %s)", lockStates(o.Locks))
			default:
				f.Detail = "payment succeeded; stock sold the order under payment " + o.PaidBy + " (this one must be refunded)"
			}
			n, last, waiting := p.RedriveWaiting(now, cfg.PaidNotSoldAge)
			if n > 0 {
				f.Values["redrives"] = int64(n)
			}
			if waiting {
				// The copy has the time the first event had; asking the row lock for a
				// refusal would only slow the payments being paid.
				f.Detail += fmt.Sprintf("; copy %d re-published at %s, within RECONCILE_PAID_NOT_SOLD_AGE", n, last.Format(time.RFC3339))
				res.Findings = append(res.Findings, f)
				continue
			}
			if mode == reconcile.Repair {
				n, err := svc.RedrivePayment(ctx, p.ID(), cfg.PaidNotSoldAge)
				switch {
				case errors.Is(err, payment.ErrNotSucceeded):
					f.Detail += "; the payment is no longer succeeded: nothing to re-drive"
				case errors.Is(err, payment.ErrRedriveWaiting):
					f.Detail += "; a copy went out meanwhile"
				case err != nil:
					f.Error = err.Error()
				default:
					f.Repaired = true
					f.Values["redrives"] = int64(n)
					f.Detail += fmt.Sprintf("; payment.succeeded re-published (%d)", n)
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
