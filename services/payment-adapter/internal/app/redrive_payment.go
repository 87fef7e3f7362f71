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
// for a payment whose sale stock never made (the first event was lost or dead-lettered). The
// event has a new id — the consumers' inbox would swallow the first id — and the same
// payload: stock sells per payment id, so a payment it did sell meanwhile is a no-op there.
// A payment no longer succeeded (refunded meanwhile, or failed) emits nothing and returns
// false.
func (s *Service) RedrivePayment(ctx context.Context, paymentID string) (bool, error) {
	sent := false
	_, _, err := s.store.UpdatePayments(ctx, nil, Selector{PaymentID: paymentID},
		func(p *payment.Payment) (bool, []events.Message, error) {
			if p.Status() != payment.Succeeded {
				return false, nil, nil
			}
			ev := succeeded(p)
			msg, err := events.EncodeWithID(ev.Subject()+":"+p.ID()+":redrive:"+s.newID(), ev, s.now())
			if err != nil {
				return false, nil, err
			}
			sent = true
			return false, []events.Message{msg}, nil
		})
	if err != nil {
		return false, fmt.Errorf("redrive payment %s: %w", paymentID, err)
	}
	return sent, nil
}
