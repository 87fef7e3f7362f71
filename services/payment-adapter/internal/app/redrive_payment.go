package app

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// ListSucceeded returns up to limit payments recorded in [from, to) that are still succeeded.
func (s *Service) ListSucceeded(ctx context.Context, from, to time.Time, limit int) ([]*payment.Payment, error) {
	ps, err := s.store.ListSucceeded(ctx, from, to, limit)
	if err != nil {
		return nil, fmt.Errorf("list succeeded payments: %w", err)
	}
	return ps, nil
}

// RedrivePayment publishes payment.succeeded of a succeeded payment again, through the outbox,
// for a payment whose sale stock never made (the first event was lost or dead-lettered), and
// returns which copy it was (payment.Payment.Redrive: at most one per wait). It is the same
// event again: its envelope keeps the first copy's id, so a consumer that took either copy
// takes the other as a duplicate — stock acts on a payment's success once, and a payment whose
// first copy failed to sell (stock.sell_failed, a refund on its way) is never sold by a late
// copy when stock has come back meanwhile (a chaos run sold one after its refund). Only the
// outbox row and its Nats-Msg-Id are the copy's own, or JetStream's duplicate window would
// drop it. Errors:
// payment.ErrNotSucceeded (refunded meanwhile, or failed) and payment.ErrRedriveWaiting emit
// nothing.
func (s *Service) RedrivePayment(ctx context.Context, paymentID string, wait time.Duration) (n int, err error) {
	_, err = s.store.UpdatePayments(ctx, nil, Selector{PaymentID: paymentID},
		func(p *payment.Payment) (bool, []events.Message, error) {
			if n, err = p.Redrive(s.now(), wait); err != nil {
				return false, nil, err
			}
			ev := succeeded(p)
			msg, err := events.EncodeWithID(ev.Subject()+":"+p.ID(), ev, s.now())
			if err != nil {
				return false, nil, err
			}
			msg.ID = fmt.Sprintf("%s:redrive:%d", msg.ID, n)
			return true, []events.Message{msg}, nil
		})
	if err != nil {
		return 0, fmt.Errorf("redrive payment %s: %w", paymentID, err)
	}
	return n, nil
}
