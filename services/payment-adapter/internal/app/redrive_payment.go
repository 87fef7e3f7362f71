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
// returns which copy it was (payment.Payment.Redrive: at most one per wait). The event has
// its own id — the consumers' inbox would swallow the first one — and the same payload:
// stock sells per payment id, so a payment it did sell meanwhile is a no-op there. Errors:
// payment.ErrNotSucceeded (refunded meanwhile, or failed) and payment.ErrRedriveWaiting emit
// nothing.
func (s *Service) RedrivePayment(ctx context.Context, paymentID string, wait time.Duration) (n int, err error) {
	_, err = s.store.UpdatePayments(ctx, nil, Selector{PaymentID: paymentID},
		func(p *payment.Payment) (bool, []events.Message, error) {
			if n, err = p.Redrive(s.now(), wait); err != nil {
				return false, nil, err
			}
			ev := succeeded(p)
			msg, err := events.EncodeWithID(fmt.Sprintf("%s:%s:redrive:%d", ev.Subject(), p.ID(), n), ev, s.now())
			if err != nil {
				return false, nil, err
			}
			return true, []events.Message{msg}, nil
		})
	if err != nil {
		return 0, fmt.Errorf("redrive payment %s: %w", paymentID, err)
	}
	return n, nil
}
