package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// ErrPaymentUnknown is returned by RefundPayment for a payment id payment-adapter never
// issued. payment ids reach other services only through payment.succeeded, which is
// published after the payment committed, so this is never a race: the consumer terminates
// the message and it waits in DEADLETTER for a human (money may be involved).
var ErrPaymentUnknown = errors.New("refund of an unknown payment")

// RefundPayment pays back one payment — stock.sell_failed: a payment stock could not fulfil
// (late, and the stock was gone; or a second payment of an order already sold). The payment
// becomes refunded and payment.refunded is emitted, in one transaction with the inbox claim.
// A payment already refunded (by an earlier message, or by the order's refund) changes
// nothing and emits nothing. A failed payment took no money: logged, nothing emitted.
func (s *Service) RefundPayment(ctx context.Context, in inbox.Message, paymentID, reason string) error {
	if paymentID == "" {
		return fmt.Errorf("refund payment: %w: no payment id", ErrPaymentUnknown)
	}
	_, _, err := s.store.UpdatePayments(ctx, &in, Selector{PaymentID: paymentID}, s.refund(ctx, reason))
	if errors.Is(err, payment.ErrNotFound) {
		return fmt.Errorf("refund payment %s: %w: %w", paymentID, ErrPaymentUnknown, err)
	}
	if err != nil {
		return fmt.Errorf("refund payment %s: %w", paymentID, err)
	}
	return nil
}

// RefundOrder pays back every succeeded payment of an order — order.refund_requested: the
// buyer gets all the money of the order back, one payment.refunded per payment.
//
// An order with no succeeded payment (none at all, only failed ones, or all refunded
// already, say by stock.sell_failed first) is acknowledged with a log line and no event.
// Decision: the order service only requests a refund of an order that was paid, and paid
// means a payment.succeeded from here, so "nothing to refund" means the money is already
// back; an error would only loop in retries and then dead-letter a message that needs no
// action. The order completes on the payment.refunded it already got.
func (s *Service) RefundOrder(ctx context.Context, in inbox.Message, orderID, reason string) error {
	refunded := 0
	fn := s.refund(ctx, reason)
	dup, found, err := s.store.UpdatePayments(ctx, &in, Selector{OrderID: orderID},
		func(p *payment.Payment) (bool, []events.Message, error) {
			if p.Status() != payment.Succeeded {
				return false, nil, nil // failed ones took no money; refunded ones are done
			}
			changed, msgs, err := fn(p)
			if changed {
				refunded++
			}
			return changed, msgs, err
		})
	if err != nil {
		return fmt.Errorf("refund order %s: %w", orderID, err)
	}
	if !dup && refunded == 0 {
		s.log.WarnContext(ctx, "refund requested for an order with no succeeded payment; nothing to refund",
			"order_id", orderID, "payments", found, "message_id", in.ID)
	}
	return nil
}

// refund is the update that refunds one payment through its provider.
func (s *Service) refund(ctx context.Context, reason string) func(*payment.Payment) (bool, []events.Message, error) {
	return func(p *payment.Payment) (bool, []events.Message, error) {
		log := s.log.With("payment_id", p.ID(), "order_id", p.OrderID())
		switch p.Status() {
		case payment.Refunded:
			log.InfoContext(ctx, "payment already refunded")
			return false, nil, nil
		case payment.Failed:
			log.WarnContext(ctx, "refund of a failed payment ignored: it took no money", "reason", p.FailureReason())
			return false, nil, nil
		}
		changed, err := s.payBack(ctx, p, reason)
		if err != nil || !changed {
			return false, nil, err
		}
		ev := events.PaymentRefunded{PaymentID: p.ID(), OrderID: p.OrderID(), Amount: p.Amount()}
		msg, err := events.EncodeWithID(ev.Subject()+":"+p.ID(), ev, s.now())
		if err != nil {
			return false, nil, err
		}
		log.InfoContext(ctx, "payment refunded", "refund_id", p.Refund().ID, "reason", reason)
		return true, []events.Message{msg}, nil
	}
}

// payBack asks p's provider for p's one refund and marks p refunded.
func (s *Service) payBack(ctx context.Context, p *payment.Payment, reason string) (changed bool, err error) {
	rf, err := s.providers.Refunder(p.Provider())
	if err != nil {
		return false, err
	}
	// One refund per payment, so the refund id derives from the payment id: a retry after
	// a crash asks the provider for the same refund again, never for a second one.
	refundID := "refund-" + p.ID()
	res, err := rf.Refund(ctx, payment.RefundRequest{
		RefundID: refundID, PaymentID: p.ID(), OrderID: p.OrderID(), ProviderTxnID: p.ProviderTxnID(),
		Amount: p.Amount(), Currency: p.Currency(), Reason: reason,
	})
	if err != nil {
		return false, fmt.Errorf("provider %s refund: %w", p.Provider(), err)
	}
	return p.MarkRefunded(payment.Refund{ID: refundID, ProviderRefundID: res.ProviderRefundID, Reason: reason, At: s.now()})
}

// refundMismatch pays back a payment the provider captured for the wrong amount or currency
// (payment.CapturedMismatch): the money was taken, but the order was never paid by it, and
// nothing else would ever return it. No payment.refunded is emitted: the order already has
// this payment's payment.failed, and a payment.refunded would move a closed or refund_pending
// order to refunded as if its own payment had come back.
func (s *Service) refundMismatch(ctx context.Context, id string) (*payment.Payment, error) {
	var out *payment.Payment
	_, _, err := s.store.UpdatePayments(ctx, nil, Selector{PaymentID: id},
		func(p *payment.Payment) (bool, []events.Message, error) {
			out = p
			if !p.CapturedMismatch() {
				return false, nil, nil // refunded by an earlier delivery of the notification
			}
			reason := p.FailureReason()
			changed, err := s.payBack(ctx, p, reason)
			if changed {
				s.log.WarnContext(ctx, "payment of the wrong amount or currency refunded", "payment_id", p.ID(),
					"order_id", p.OrderID(), "amount", p.Amount(), "currency", p.Currency(), "reason", reason)
			}
			return changed, nil, err
		})
	if err != nil {
		return nil, fmt.Errorf("refund mismatched payment %s: %w", id, err)
	}
	return out, nil
}
