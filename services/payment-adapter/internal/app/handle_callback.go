package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// CallbackResult is what a provider callback did.
type CallbackResult struct {
	Payment   *payment.Payment
	Duplicate bool // the notification was recorded before; nothing changed
}

// HandleCallback verifies a notification posted by provider and records it: a payment row and
// payment.succeeded (or payment.failed: declined, or amount or currency not the order's) in
// one transaction. A succeeded payment of the wrong amount or currency never pays the order,
// and the money the provider took for it is refunded at once (the payment ends refunded).
// Errors, nothing stored for any of them:
//
//   - payment.ErrUnknownProvider: no such provider;
//   - payment.ErrInvalidSignature: not provably from the provider;
//   - payment.ErrMalformedNotification: authentic but not understood;
//   - payment.ErrOrderUnknown: the order's order.created has not reached us yet.
//
// ErrOrderUnknown is deliberately a retryable failure (the HTTP API answers 503), not an
// acknowledgement: every provider retries a notification that was not acknowledged with a
// 2xx, by which time order.created has normally arrived, and storing a payment for an order
// whose total we cannot check would let a wrong amount through as "succeeded". A notification
// for an order that never existed keeps failing and stays visible at the provider.
//
// A notification whose provider transaction id is already recorded is a duplicate: it returns
// the stored payment with Duplicate set, changes nothing and emits nothing — even when its
// content differs, which is logged as a warning (a provider never changes a settled
// transaction; a conflicting repeat is a bug or an attack, for a human to look at).
//
// stockflow.payment.callbacks counts each callback of a registered provider by verdict:
// accepted (new, recorded), duplicate, forged (ErrInvalidSignature), malformed
// (ErrMalformedNotification) or mismatch (recorded failed: not the order's amount or
// currency). A callback that fails otherwise (an unknown order, the database) has no verdict
// yet: the provider sends it again.
func (s *Service) HandleCallback(ctx context.Context, provider string, h http.Header, body []byte) (CallbackResult, error) {
	p, err := s.providers.Provider(provider)
	if err != nil {
		return CallbackResult{}, fmt.Errorf("callback: %w", err)
	}
	n, err := p.Verify(h, body)
	if err != nil {
		s.rec.refused(ctx, provider, err)
		return CallbackResult{}, fmt.Errorf("callback %s: %w", provider, err)
	}
	stored, created, err := s.store.RecordPayment(ctx, n.Provider, n.ProviderTxnID, n.OrderID,
		func(o payment.OrderTotal) (*payment.Payment, []events.Message, error) {
			// The provider's call starts a trace of its own (it carries no trace context of
			// ours); its span links to the order's trace, where order.created reached us.
			telemetry.LinkTraceparent(ctx, o.Traceparent, events.SubjectOrderCreated)
			pay, err := payment.Record(s.newID(), n, o, s.now())
			if err != nil {
				return nil, nil, err
			}
			msg, err := s.outcome(pay)
			if err != nil {
				return nil, nil, err
			}
			return pay, []events.Message{msg}, nil
		})
	if err != nil {
		s.rec.refused(ctx, provider, err)
		return CallbackResult{}, fmt.Errorf("callback %s %s for order %s: %w", provider, n.ProviderTxnID, n.OrderID, err)
	}
	s.rec.recorded(ctx, provider, created, stored) // committed: counted once, whatever the refund below does
	if stored.CapturedMismatch() {
		// After the payment committed, so the refund id (from the payment id) is the same on
		// every try. A failed refund fails the callback: the provider redelivers it, and the
		// duplicate tries the refund again.
		if stored, err = s.refundMismatch(ctx, stored.ID()); err != nil {
			return CallbackResult{}, fmt.Errorf("callback %s %s for order %s: %w", provider, n.ProviderTxnID, n.OrderID, err)
		}
	}
	log := s.log.With("payment_id", stored.ID(), "order_id", stored.OrderID(), "provider", provider, "provider_txn_id", n.ProviderTxnID)
	switch {
	case created:
		log.InfoContext(ctx, "payment recorded", "status", stored.Status().String(), "reason", stored.FailureReason())
	case !stored.Matches(n):
		log.WarnContext(ctx, "duplicate notification differs from the recorded payment; kept the recorded one",
			"recorded_amount", stored.Amount(), "recorded_currency", stored.Currency(), "recorded_status", stored.Status().String(),
			"amount", n.Amount, "currency", n.Currency, "outcome", n.Outcome.String())
	default:
		log.DebugContext(ctx, "duplicate notification acknowledged")
	}
	return CallbackResult{Payment: stored, Duplicate: !created}, nil
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
