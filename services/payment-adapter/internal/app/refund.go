package app

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// Refunds take two steps (docs/payments.md). The first, in this file, only records: the
// payment's one refund (payment.RefundIDOf) becomes requested and payment.refund_requested is
// written to the outbox, in one transaction with the inbox claim of the message that asked
// for it. The second (execute_refund.go) consumes payment.refund_requested and asks the
// provider outside any transaction; the provider's answer, a refund notification
// (HandleCallback) or the unconfirmed refunds job's query completes the refund:
// payment.refunded is emitted in the transaction that marks the payment refunded.

// ErrPaymentUnknown is returned by RefundPayment for a payment id payment-adapter never
// issued. payment ids reach other services only through payment.succeeded, which is
// published after the payment committed, so this is never a race: the consumer terminates
// the message and it waits in DEADLETTER for a human (money may be involved).
var ErrPaymentUnknown = errors.New("refund of an unknown payment")

// RefundPayment records the refund of one payment — stock.sell_failed: a payment stock could
// not fulfil (late, and the stock was gone; or a second payment of an order already sold).
// A payment whose refund was requested before (by an earlier message, by the order's refund)
// changes nothing and emits nothing. A failed payment took no money: logged, nothing emitted.
func (s *Service) RefundPayment(ctx context.Context, in inbox.Message, paymentID, reason string) error {
	if paymentID == "" {
		return fmt.Errorf("refund payment: %w: no payment id", ErrPaymentUnknown)
	}
	_, err := s.store.UpdatePayments(ctx, &in, Selector{PaymentID: paymentID}, s.requestRefund(ctx, reason))
	if errors.Is(err, payment.ErrNotFound) {
		return fmt.Errorf("refund payment %s: %w: %w", paymentID, ErrPaymentUnknown, err)
	}
	if err != nil {
		return fmt.Errorf("refund payment %s: %w", paymentID, err)
	}
	return nil
}

// RefundOrder records the refund of every succeeded payment of an order —
// order.refund_requested: the buyer gets all the money of the order back, one
// payment.refunded per payment once each refund succeeded.
//
// An order no payment paid (none at all, or only failed ones, refunded or not) was sold by
// hand (stock's manual sell): it gets payment.nothing_to_refund, on which the order completes
// its refund (review F12, decision 0002). An order whose succeeded payments are all refunded
// or being refunded already (say by stock.sell_failed first) is acknowledged with a log line
// and no event: its money is back or on its way, and when a payment refunded for another
// reason was all it had, the order waits in refund_pending for a human (its age alert).
func (s *Service) RefundOrder(ctx context.Context, in inbox.Message, orderID, reason string) error {
	requested := 0
	fn := s.requestRefund(ctx, reason)
	dup, err := s.store.UpdateOrderPayments(ctx, &in, orderID,
		func(p *payment.Payment) (bool, []events.Message, error) {
			if p.Status() != payment.Succeeded || p.Refund() != nil {
				return false, nil, nil // failed ones took no money; refunded or refunding ones are done
			}
			changed, msgs, err := fn(p)
			if changed {
				requested++
			}
			return changed, msgs, err
		},
		func(ps []*payment.Payment) ([]events.Message, error) {
			if requested > 0 {
				return nil, nil
			}
			if slices.ContainsFunc(ps, (*payment.Payment).PaidOrder) {
				s.log.WarnContext(ctx, "refund requested for an order whose payments are all refunded or being refunded already; nothing to do",
					"order_id", orderID, "payments", len(ps), "message_id", in.ID)
				return nil, nil
			}
			s.log.InfoContext(ctx, "refund requested for an order no payment paid: nothing to refund here",
				"order_id", orderID, "payments", len(ps), "message_id", in.ID)
			ev := events.PaymentNothingToRefund{OrderID: orderID}
			msg, err := events.EncodeWithID(ev.Subject()+":"+orderID, ev, s.now())
			return []events.Message{msg}, err
		})
	if err != nil {
		return fmt.Errorf("refund order %s: %w", orderID, err)
	}
	if dup {
		s.log.DebugContext(ctx, "order.refund_requested already processed", "order_id", orderID, "message_id", in.ID)
	}
	return nil
}

// requestRefund is the update that records the request of one payment's refund and writes its
// payment.refund_requested.
func (s *Service) requestRefund(ctx context.Context, reason string) func(*payment.Payment) (bool, []events.Message, error) {
	return func(p *payment.Payment) (bool, []events.Message, error) {
		log := s.log.With("payment_id", p.ID(), "order_id", p.OrderID())
		if r := p.Refund(); r != nil {
			if r.State == payment.RefundRefused {
				log.WarnContext(ctx, "refund asked again for a payment whose refund failed; it stays failed, for a human",
					"refund_id", r.ID, "last_error", r.LastError, "reason", reason)
			} else {
				log.InfoContext(ctx, "payment refund already requested", "refund_id", r.ID, "refund_status", r.State.String())
			}
			return false, nil, nil
		}
		if p.Status() == payment.Failed && !p.CapturedMismatch() {
			log.WarnContext(ctx, "refund of a failed payment ignored: it took no money", "reason", p.FailureReason())
			return false, nil, nil
		}
		changed, err := p.RequestRefund(reason, s.now())
		if err != nil || !changed {
			return false, nil, err
		}
		msg, err := s.refundRequested(p)
		if err != nil {
			return false, nil, err
		}
		s.rec.refund(ctx, p.Provider(), refundRequested)
		log.InfoContext(ctx, "payment refund requested", "refund_id", p.Refund().ID, "reason", reason)
		return true, []events.Message{msg}, nil
	}
}

// refundRequested is the payment.refund_requested of p's refund, under a deterministic id: one
// request is one event, however often it is written.
func (s *Service) refundRequested(p *payment.Payment) (events.Message, error) {
	r := p.Refund()
	ev := events.PaymentRefundRequested{PaymentID: p.ID(), OrderID: p.OrderID(), RefundID: r.ID, Reason: r.Reason}
	return events.EncodeWithID(ev.Subject()+":"+p.ID(), ev, s.now())
}

// applyRefund applies what the provider said of p's refund — its answer to the request or to
// a query, or its notification — and returns the messages to emit: payment.refunded when the
// refund just succeeded. A payment captured for the wrong amount or currency emits none: the
// order already has its payment.failed, and a payment.refunded would move a closed or
// refund_pending order to refunded as if its own payment had come back.
func (s *Service) applyRefund(ctx context.Context, p *payment.Payment, res payment.RefundResult, source string) (bool, []events.Message, error) {
	mismatch := p.CapturedMismatch()
	before := p.Refund()
	changed, err := p.ApplyRefundResult(res, s.now())
	if err != nil || !changed {
		return false, nil, err
	}
	r := p.Refund()
	log := s.log.With("payment_id", p.ID(), "order_id", p.OrderID(), "provider", p.Provider(), "refund_id", r.ID,
		"provider_refund_id", r.ProviderRefundID, "source", source)
	if before != nil && before.State == r.State {
		return true, nil, nil // only the provider's refund id is new
	}
	switch r.State {
	case payment.RefundDone:
		s.rec.refund(ctx, p.Provider(), refundSucceeded)
		if before != nil && before.State == payment.RefundRefused {
			log.WarnContext(ctx, "refund marked failed earlier is succeeded by the provider's word: the money is back")
		}
		if mismatch {
			log.WarnContext(ctx, "payment of the wrong amount or currency refunded", "amount", p.Amount(), "currency", p.Currency(), "reason", r.Reason)
			return true, nil, nil
		}
		ev := events.PaymentRefunded{PaymentID: p.ID(), OrderID: p.OrderID(), Amount: p.Amount()}
		msg, err := events.EncodeWithID(ev.Subject()+":"+p.ID(), ev, s.now())
		if err != nil {
			return false, nil, err
		}
		log.InfoContext(ctx, "payment refunded", "reason", r.Reason)
		return true, []events.Message{msg}, nil
	case payment.RefundInProgress:
		s.rec.refund(ctx, p.Provider(), refundPending)
		log.InfoContext(ctx, "payment refund pending at the provider")
	case payment.RefundRefused:
		s.rec.refund(ctx, p.Provider(), refundFailed)
		log.ErrorContext(ctx, "payment refund failed: the money was not paid back; for a human", "error", r.LastError,
			"amount", p.Amount(), "currency", p.Currency())
	}
	return true, nil, nil
}

// refundRequest is what the provider is asked for p's refund.
func refundRequest(p *payment.Payment) payment.RefundRequest {
	r := p.Refund()
	return payment.RefundRequest{
		RefundID: r.ID, PaymentID: p.ID(), OrderID: p.OrderID(), ProviderTxnID: p.ProviderTxnID(),
		Amount: p.Amount(), Currency: p.Currency(), Reason: r.Reason,
	}
}
