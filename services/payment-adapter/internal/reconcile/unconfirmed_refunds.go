package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// Finding kinds of the unconfirmed refunds job.
const (
	// KindRefundUnconfirmed: a refund requested or pending for longer than RefundsAge.
	KindRefundUnconfirmed = "refund_unconfirmed"
	// KindRefundFailed: the provider will not pay the money back; for a human.
	KindRefundFailed = "refund_failed"
)

// UnconfirmedRefunds is the unconfirmed refunds job: every refund still requested or pending
// cfg.RefundsAge after it was requested (up to cfg.ReconcileBatch, oldest first) is taken to
// its provider (app.ConfirmRefund): the provider is queried, and repairing applies its answer
// as a notification's is (succeeded → payment.refunded), or asks again under the same refund
// id — the provider's idempotency key — for a refund it never got. Checking only queries. Every such refund is a finding (refund_unconfirmed): repaired when the run moved it
// on. Every failed refund (up to cfg.ReconcileBatch) is a finding too (refund_failed), never
// repaired: the provider refused, the money is not back, and a human must pay the buyer.
//
// What bounds an order's refund_pending: the order leaves it on payment.refunded, which is
// emitted when the provider says the money is back. Nothing here waits for a message that
// may never come: every run asks the provider again, so an open refund ends at most one
// interval after its provider settles it — Alipay refunds synchronously, WeChat Pay's
// PROCESSING and Stripe's pending end in SUCCESS or a failure — and a request that never
// reached the provider is made again each run. A refund the provider cannot be asked about
// (down, or no longer configured) or will not settle is a finding in every run, and one it
// refused is a refund_failed finding in every run: the reconcile metrics and the runs API
// show it to a human, who is then the bound. The batch is oldest first, so more than
// cfg.ReconcileBatch refunds the providers never settle would keep newer ones from being
// asked: the findings say so long before.
func UnconfirmedRefunds(svc *app.Service, cfg config.Config) reconcile.Job {
	return reconcile.Job{Name: "unconfirmed_refunds", Interval: cfg.RefundsInterval, Run: func(ctx context.Context, mode reconcile.Mode) (reconcile.Result, error) {
		var res reconcile.Result
		// The failed ones first: a refund that fails in this run is reported once, below.
		failed, err := svc.ListFailedRefunds(ctx, cfg.ReconcileBatch)
		if err != nil {
			return res, err
		}
		open, err := svc.ListOpenRefunds(ctx, time.Now().Add(-cfg.RefundsAge), cfg.ReconcileBatch)
		if err != nil {
			return res, err
		}
		res.Checked = len(failed) + len(open)
		for _, p := range failed {
			f := refundFinding(KindRefundFailed, p)
			f.Detail = "the provider refused the refund: the money was not paid back; for a human (" + p.Refund().LastError + ")"
			res.Findings = append(res.Findings, f)
		}
		for _, p := range open {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			c, err := svc.ConfirmRefund(ctx, p.ID(), mode == reconcile.Repair)
			res.Findings = append(res.Findings, unconfirmed(p, c, err))
		}
		return res, nil
	}}
}

// unconfirmed is the finding of the open refund of p after the check c.
func unconfirmed(p *payment.Payment, c app.RefundCheck, err error) reconcile.Finding {
	f := refundFinding(KindRefundUnconfirmed, p)
	r := p.Refund()
	since := fmt.Sprintf("refund %s since %s", r.State, r.RequestedAt.Format(time.RFC3339))
	after := r
	if c.After != nil {
		after = c.After
	}
	switch {
	case err != nil:
		f.Detail, f.Error = since+"; the provider could not be asked, again next run", err.Error()
	case after.State == payment.RefundDone:
		f.Repaired, f.Detail = true, since+"; the provider says the money is back: refunded"
	case after.State == payment.RefundRefused:
		f.Kind, f.Detail = KindRefundFailed, since+"; the provider refused it: the money was not paid back; for a human ("+after.LastError+")"
	case c.Action != "":
		f.Repaired, f.Detail = true, since+"; the provider has it now, "+after.State.String()
	case c.NotFound:
		f.Detail = since + "; the provider has no such refund: its request never reached it (repair asks for it, same refund id)"
	case c.Queried.Status == payment.RefundSucceeded:
		f.Detail = since + "; the provider says the money is back (repair records it)"
	case c.Queried.Status == payment.RefundFailed:
		f.Detail = since + "; the provider says it failed (repair records it): " + c.Queried.Reason
	default:
		f.Detail = since + "; the provider says it is pending: waiting for it"
	}
	return f
}

func refundFinding(kind string, p *payment.Payment) reconcile.Finding {
	r := p.Refund()
	f := reconcile.Finding{Kind: kind,
		IDs:    map[string]string{"payment_id": p.ID(), "order_id": p.OrderID(), "refund_id": r.ID, "provider": p.Provider()},
		Values: map[string]int64{"amount": p.Amount(), "attempts": int64(r.Attempts)},
	}
	if r.ProviderRefundID != "" {
		f.IDs["provider_refund_id"] = r.ProviderRefundID
	}
	return f
}
