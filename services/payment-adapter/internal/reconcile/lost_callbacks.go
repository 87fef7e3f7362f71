package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
)

// Finding kinds of the lost callbacks job.
const (
	// KindLostCallback: a provider has a payment for an unpaid order that its callback never
	// brought.
	KindLostCallback = "lost_callback"
	// KindLostCallbackUnknown: a provider could not be asked.
	KindLostCallbackUnknown = "lost_callback_unknown"
)

// noDeadlineWindow is how long after payment-adapter learnt of an order remembered without a
// payment deadline (before order_totals kept one) the lost callbacks job still asks about it:
// far longer than any payment window the order service grants.
const noDeadlineWindow = 24 * time.Hour

// maxProviderFailures is how many queries in a row may fail for one provider before a run
// stops asking it: a provider that is down would otherwise hold the run for a timeout per
// order.
const maxProviderFailures = 3

// LostCallbacks is the lost callbacks job: orders payment-adapter has known for longer than
// cfg.LostCallbacksAge with no succeeded or refunded payment and whose payment deadline has
// not passed (app.ListUnpaidOrders) are asked about at every provider that can be asked
// (payment.Querier: Stripe, WeChat Pay, Alipay; not the sandbox) — a payment is made at one
// provider, and the adapter does not know which. A payment the provider has and the adapter
// has not recorded is a finding (lost_callback); repairing records it through
// app.FindLostPayment, the path of its callback (payment.succeeded, or payment.failed and a
// refund for the wrong amount), so the callback arriving later is a duplicate. A provider
// with no payment for the order is no finding: the buyer has not paid.
//
// The work of a run is bounded: at most cfg.ReconcileBatch provider queries (orders ×
// providers), oldest orders first, and a provider whose queries fail maxProviderFailures
// times in a row is not asked again in that run (one lost_callback_unknown finding per
// failure).
func LostCallbacks(svc *app.Service, cfg config.Config) reconcile.Job {
	return reconcile.Job{Name: "lost_callbacks", Interval: cfg.LostCallbacksInterval, Run: func(ctx context.Context, mode reconcile.Mode) (reconcile.Result, error) {
		var res reconcile.Result
		providers := svc.Queriers()
		if len(providers) == 0 {
			return res, nil // the sandbox alone cannot be asked
		}
		now := time.Now()
		orders, err := svc.ListUnpaidOrders(ctx, now.Add(-cfg.LostCallbacksAge), now, now.Add(-noDeadlineWindow),
			max(1, cfg.ReconcileBatch/len(providers)))
		if err != nil {
			return res, err
		}
		res.Checked = len(orders)
		failures := map[string]int{}
		for _, o := range orders {
			for _, name := range providers {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				if failures[name] >= maxProviderFailures {
					continue
				}
				f := reconcile.Finding{Kind: KindLostCallback, IDs: map[string]string{"order_id": o.OrderID, "provider": name},
					Values: map[string]int64{"order_total": o.Total}}
				lp, err := svc.FindLostPayment(ctx, name, o.OrderID, mode == reconcile.Repair)
				switch {
				case err != nil && lp.Found == nil:
					failures[name]++
					f.Kind, f.Error = KindLostCallbackUnknown, err.Error()
					f.Detail = "could not ask " + name + " about the order's payment"
					if failures[name] == maxProviderFailures {
						f.Detail += fmt.Sprintf("; %d failures in a row: not asked again in this run", maxProviderFailures)
					}
					res.Findings = append(res.Findings, f)
					continue
				}
				failures[name] = 0 // it answered
				if lp.Found == nil || lp.Known {
					continue // not paid there, or recorded: its callback arrived
				}
				n := lp.Found
				f.IDs["provider_txn_id"] = n.ProviderTxnID
				f.Values["amount"] = n.Amount
				f.Detail = fmt.Sprintf("%s has a %s payment of %d %s the adapter never recorded: its callback was lost",
					name, n.Outcome, n.Amount, n.Currency)
				switch {
				case err != nil:
					f.Error = err.Error()
				case lp.Applied:
					f.Repaired = true
					f.IDs["payment_id"] = lp.Payment.ID()
					f.Detail += "; recorded as its callback would have been: " + lp.Payment.Status().String()
					if lp.Payment.CapturedMismatch() {
						f.Detail += " (" + lp.Payment.FailureReason() + "), its refund requested"
					}
				}
				res.Findings = append(res.Findings, f)
			}
		}
		return res, nil
	}}
}
