package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// CallbackResult is what a provider callback did.
type CallbackResult struct {
	// Payment is the payment the notification recorded or named; nil for an ignored
	// notification.
	Payment   *payment.Payment
	Duplicate bool // the notification was recorded before, or its refund stands there already; nothing changed
	// Ignored: an authentic notification of a kind the adapter does not act on.
	Ignored bool
	// RefundNotice: the notification was a refund's confirmation (Notification.Refund).
	RefundNotice bool
	// Unmatched: a refund confirmation for a refund payment-adapter never requested (or
	// another one); nothing changed, logged for a human.
	Unmatched bool
}

// HandleCallback verifies a notification posted by provider and records it: a payment row and
// payment.succeeded (or payment.failed: declined, or amount or currency not the order's) in
// one transaction. A succeeded payment of the wrong amount or currency never pays the order,
// and the money the provider took for it is refunded: the refund is requested in the same
// transaction (payment.refund_requested) and made by ExecuteRefund.
//
// Errors, nothing stored for any of them:
//
//   - payment.ErrUnknownProvider: no such provider;
//   - payment.ErrInvalidSignature: not provably from the provider;
//   - payment.ErrMalformedNotification: authentic but not understood;
//   - payment.ErrOrderUnknown: the order's order.created has not reached us yet;
//   - payment.ErrTxnUnknown: a refund confirmation for a transaction with no payment yet.
//
// ErrOrderUnknown and ErrTxnUnknown are deliberately retryable failures (the HTTP API answers
// 503), not acknowledgements: every provider retries a notification that was not
// acknowledged with a 2xx, by which time order.created (or the payment's own notification)
// has normally arrived, and storing a payment for an order whose total we cannot check would
// let a wrong amount through as "succeeded". A notification for an order that never existed
// keeps failing and stays visible at the provider.
//
// An authentic notification the provider's Verify says the adapter does not act on
// (payment.ErrIgnoredNotification: another Stripe event type, say) is acknowledged with
// Ignored set and stores nothing.
//
// A notification whose provider transaction id is already recorded is a duplicate: it returns
// the stored payment with Duplicate set, changes nothing and emits nothing — even when its
// content differs, which is logged as a warning (a provider never changes a settled
// transaction; a conflicting repeat is a bug or an attack, for a human to look at). The one
// exception: the success of a transaction recorded declined, which the buyer tried again
// (payment.SucceedAfterDecline), is recorded as if it had come first.
//
// A notification with Refund set confirms a refund (applyRefundNotice).
//
// stockflow.payment.callbacks counts each callback of a registered provider by verdict:
// accepted (new, recorded), duplicate (a payment recorded before, or a refund confirmation
// that changes nothing), forged (ErrInvalidSignature), malformed (ErrMalformedNotification),
// mismatch (recorded failed: not the order's amount or currency), ignored
// (ErrIgnoredNotification), refund (a refund confirmation applied) or refund_unmatched (a
// refund confirmation for no refund we requested). A callback that fails otherwise (an
// unknown order or transaction, the database) has no verdict yet: the provider sends it again.
func (s *Service) HandleCallback(ctx context.Context, provider string, h http.Header, body []byte) (CallbackResult, error) {
	p, err := s.providers.Provider(provider)
	if err != nil {
		return CallbackResult{}, fmt.Errorf("callback: %w", err)
	}
	n, err := p.Verify(h, body)
	if errors.Is(err, payment.ErrIgnoredNotification) {
		s.rec.count(ctx, provider, verdictIgnored)
		s.log.DebugContext(ctx, "notification ignored", "provider", provider, "why", err.Error())
		return CallbackResult{Ignored: true}, nil
	}
	if err == nil && n.Provider != provider {
		err = fmt.Errorf("%w: notification of provider %q posted for %q", payment.ErrMalformedNotification, n.Provider, provider)
	}
	if err != nil {
		s.rec.refused(ctx, provider, err)
		return CallbackResult{}, fmt.Errorf("callback %s: %w", provider, err)
	}
	if n.Refund != nil {
		res, err := s.applyRefundNotice(ctx, n)
		if err != nil {
			s.rec.refused(ctx, provider, err)
			return CallbackResult{}, fmt.Errorf("callback %s refund of %s: %w", provider, n.ProviderTxnID, err)
		}
		return res, nil
	}
	res, err := s.record(ctx, n, "callback")
	if err != nil {
		s.rec.refused(ctx, provider, err)
		return CallbackResult{}, fmt.Errorf("callback %s %s for order %s: %w", provider, n.ProviderTxnID, n.OrderID, err)
	}
	s.rec.recorded(ctx, provider, !res.Duplicate, res.Payment)
	return res, nil
}

// record stores the payment a verified (or queried) notification n makes, as HandleCallback
// describes: one transaction with its outcome event, and, for money captured for the wrong
// amount or currency, the request of its refund. A notification of a provider transaction
// recorded before returns the stored payment with Duplicate set and changes nothing — but
// for the success of a transaction recorded declined (payment.SucceedAfterDecline: a buyer
// who tried again on the same Stripe PaymentIntent), which the payment becomes, with its
// events, as if it had come first (review F11).
func (s *Service) record(ctx context.Context, n payment.Notification, source string) (CallbackResult, error) {
	retried := false
	stored, created, err := s.store.RecordPayment(ctx, n.Provider, n.ProviderTxnID, n.OrderID,
		func(o payment.OrderTotal, existing *payment.Payment) (*payment.Payment, bool, []events.Message, error) {
			// The provider's call starts a trace of its own (it carries no trace context of
			// ours); its span links to the order's trace, where order.created reached us.
			telemetry.LinkTraceparent(ctx, o.Traceparent, events.SubjectOrderCreated)
			pay := existing
			if pay == nil {
				var err error
				if pay, err = payment.Record(s.newID(), n, o, s.now()); err != nil {
					return nil, false, nil, err
				}
			} else if changed, err := pay.SucceedAfterDecline(n, o, s.now()); err != nil || !changed {
				return pay, false, nil, err
			}
			retried = existing != nil
			msgs, err := s.paymentEvents(pay)
			return pay, true, msgs, err
		})
	if err != nil {
		return CallbackResult{}, err
	}
	log := s.log.With("payment_id", stored.ID(), "order_id", stored.OrderID(), "provider", n.Provider,
		"provider_txn_id", n.ProviderTxnID, "source", source)
	fresh := created || retried
	switch {
	case fresh && stored.CapturedMismatch():
		s.rec.refund(ctx, stored.Provider(), refundRequested)
		log.WarnContext(ctx, "payment of the wrong amount or currency recorded failed; its refund is requested",
			"amount", stored.Amount(), "currency", stored.Currency(), "reason", stored.FailureReason(), "declined_before", retried)
	case fresh:
		log.InfoContext(ctx, "payment recorded", "status", stored.Status().String(), "reason", stored.FailureReason(), "declined_before", retried)
	case !stored.Matches(n):
		log.WarnContext(ctx, "duplicate notification differs from the recorded payment; kept the recorded one",
			"recorded_amount", stored.Amount(), "recorded_currency", stored.Currency(), "recorded_status", stored.Status().String(),
			"amount", n.Amount, "currency", n.Currency, "outcome", n.Outcome.String())
	default:
		log.DebugContext(ctx, "duplicate notification acknowledged")
	}
	return CallbackResult{Payment: stored, Duplicate: !fresh}, nil
}

// paymentEvents is what a payment just recorded emits: its outcome event, and, for money captured
// for the wrong amount or currency — taken but never paying the order, and nothing else would
// ever return it — the request of its refund, in the same transaction.
func (s *Service) paymentEvents(pay *payment.Payment) ([]events.Message, error) {
	msg, err := s.outcome(pay)
	if err != nil {
		return nil, err
	}
	msgs := []events.Message{msg}
	if pay.CapturedMismatch() {
		if _, err := pay.RequestRefund(pay.FailureReason(), s.now()); err != nil {
			return nil, err
		}
		req, err := s.refundRequested(pay)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, req)
	}
	return msgs, nil
}

// applyRefundNotice applies a provider's refund confirmation n to the payment of
// (n.Provider, n.ProviderTxnID), through the path every refund answer takes (applyRefund):
// succeeded → refunded and payment.refunded; pending → pending; failed → failed.
//
// Decisions for the other cases, each answered 2xx but the first:
//   - no payment for the transaction: payment.ErrTxnUnknown (503), the provider retries — its
//     own payment notification may not have reached us yet;
//   - the payment has no refund, or the notice names another refund (its RefundID is not
//     ours, or its ProviderRefundID is not the one the provider gave us): Unmatched, nothing
//     changed, a warning for a human. Our refund is recorded before the provider is ever
//     asked (the request commits, then payment.refund_requested triggers the call), so a
//     confirmation can never overtake our request: an unmatched one is a refund made outside
//     stockflow (the provider's dashboard) or a partial refund we never make. Applying it
//     would tell the order its money came back when only part of it, or none of ours, did;
//   - the refund stands there already, or further on (succeeded stays succeeded): Duplicate.
func (s *Service) applyRefundNotice(ctx context.Context, n payment.Notification) (CallbackResult, error) {
	res := CallbackResult{RefundNotice: true}
	changed := false
	_, err := s.store.UpdatePayments(ctx, nil, Selector{Provider: n.Provider, ProviderTxnID: n.ProviderTxnID},
		func(p *payment.Payment) (bool, []events.Message, error) {
			res.Payment = p
			r, rn := p.Refund(), n.Refund
			if r == nil || (rn.RefundID != "" && rn.RefundID != r.ID) ||
				(rn.ProviderRefundID != "" && r.ProviderRefundID != "" && rn.ProviderRefundID != r.ProviderRefundID) {
				res.Unmatched = true
				return false, nil, nil
			}
			ch, msgs, err := s.applyRefund(ctx, p, payment.RefundResult{ProviderRefundID: rn.ProviderRefundID, Status: rn.Status}, "notification")
			changed = ch
			return ch, msgs, err
		})
	if errors.Is(err, payment.ErrNotFound) {
		return CallbackResult{}, fmt.Errorf("%w: %s/%s", payment.ErrTxnUnknown, n.Provider, n.ProviderTxnID)
	}
	if err != nil {
		return CallbackResult{}, err
	}
	log := s.log.With("payment_id", res.Payment.ID(), "order_id", res.Payment.OrderID(), "provider", n.Provider,
		"provider_txn_id", n.ProviderTxnID, "notice_refund_id", n.Refund.RefundID, "notice_provider_refund_id", n.Refund.ProviderRefundID,
		"notice_status", n.Refund.Status.String())
	switch {
	case res.Unmatched:
		s.rec.count(ctx, n.Provider, verdictRefundUnmatched)
		our := "none"
		if r := res.Payment.Refund(); r != nil {
			our = r.ID
		}
		log.WarnContext(ctx, "refund notification for a refund we did not request; nothing changed, for a human", "our_refund_id", our)
	case changed:
		s.rec.count(ctx, n.Provider, verdictRefund)
	default:
		res.Duplicate = true
		s.rec.count(ctx, n.Provider, verdictDuplicate)
		log.DebugContext(ctx, "refund notification changes nothing", "refund_status", res.Payment.Refund().State.String())
	}
	return res, nil
}

// outcome is the event announcing a new payment: payment.succeeded or payment.failed.
func (s *Service) outcome(p *payment.Payment) (events.Message, error) {
	var ev events.Event = succeeded(p)
	if p.Status() == payment.Failed {
		ev = events.PaymentFailed{PaymentID: p.ID(), OrderID: p.OrderID(), Reason: p.FailureReason()}
	}
	// A deterministic id: the same payment's outcome is one event, however often it is written.
	return events.EncodeWithID(ev.Subject()+":"+p.ID(), ev, s.now())
}

// succeeded is the payment.succeeded event of p.
func succeeded(p *payment.Payment) events.PaymentSucceeded {
	return events.PaymentSucceeded{
		PaymentID: p.ID(), OrderID: p.OrderID(), Provider: p.Provider(), ProviderTxnID: p.ProviderTxnID(),
		Amount: p.Amount(), Currency: p.Currency(),
	}
}

// Replier returns provider's Replier, or nil when it answers with the adapter's JSON (or is
// not registered).
func (s *Service) Replier(provider string) payment.Replier { return s.providers.Replier(provider) }
