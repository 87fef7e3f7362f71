package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// ListOpenRefunds returns up to limit payments whose refund is requested or pending since
// before requestedBefore, oldest request first.
func (s *Service) ListOpenRefunds(ctx context.Context, requestedBefore time.Time, limit int) ([]*payment.Payment, error) {
	ps, err := s.store.ListOpenRefunds(ctx, requestedBefore, limit)
	if err != nil {
		return nil, fmt.Errorf("list open refunds: %w", err)
	}
	return ps, nil
}

// ListFailedRefunds returns up to limit payments whose refund failed, oldest request first.
func (s *Service) ListFailedRefunds(ctx context.Context, limit int) ([]*payment.Payment, error) {
	ps, err := s.store.ListFailedRefunds(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("list failed refunds: %w", err)
	}
	return ps, nil
}

// RefundCheck is what ConfirmRefund found of one open refund.
type RefundCheck struct {
	Before  *payment.Refund      // the refund as stored when the check began
	Queried payment.RefundResult // the provider's answer to the query (zero when it failed or found nothing)
	// NotFound: the provider has no such refund (its request never reached it).
	NotFound bool
	// Action is what the check did: "" (nothing: check mode, or the answer changes nothing),
	// "applied" (the provider's answer recorded: succeeded, pending or failed) or "requested"
	// (asked for again, same refund id).
	Action string
	After  *payment.Refund // the refund as stored afterwards
}

// ConfirmRefund asks the provider where the open refund of payment paymentID stands
// (QueryRefund) and, when repair is set, acts on the answer through the path every refund
// answer takes: succeeded → the payment is refunded and payment.refunded emitted; pending →
// pending (reported, left to the provider); failed → failed, for a human; not found at the
// provider → requested again under the same refund id (askRefund: the provider's idempotency
// key makes that safe). A refund that is no longer open returns a check with no Action. A
// failed query is returned as an error (wrapping ErrProviderUnavailable) with the check so far.
func (s *Service) ConfirmRefund(ctx context.Context, paymentID string, repair bool) (RefundCheck, error) {
	var c RefundCheck
	p, err := s.store.Get(ctx, paymentID)
	if err != nil {
		return c, fmt.Errorf("confirm refund of %s: %w", paymentID, err)
	}
	c.Before, c.After = p.Refund(), p.Refund()
	if c.Before == nil || !c.Before.State.Open() {
		return c, nil
	}
	q, err := s.providers.Refunder(p.Provider())
	if err != nil {
		return c, fmt.Errorf("confirm refund of %s: %w: %w", paymentID, ErrProviderUnavailable, err)
	}
	qctx, cancel := context.WithTimeout(ctx, providerTimeout)
	res, err := q.QueryRefund(qctx, refundRequest(p))
	cancel()
	switch {
	case errors.Is(err, payment.ErrNotFound):
		c.NotFound = true
		if !repair {
			return c, nil
		}
		c.Action = "requested"
		c.After, err = s.askRefund(ctx, p, "reconcile")
		if err != nil {
			return c, fmt.Errorf("confirm refund of %s: request again: %w", paymentID, err)
		}
		return c, nil
	case errors.Is(err, payment.ErrProviderRefused):
		res = payment.RefundResult{Status: payment.RefundFailed, Reason: err.Error()}
	case err != nil:
		return c, fmt.Errorf("confirm refund of %s: %w: query: %w", paymentID, ErrProviderUnavailable, err)
	}
	c.Queried = res
	if !repair {
		return c, nil
	}
	changed := false
	_, err = s.store.UpdatePayments(ctx, nil, Selector{PaymentID: paymentID},
		func(p *payment.Payment) (bool, []events.Message, error) {
			defer func() { c.After = p.Refund() }()
			ch, msgs, err := s.applyRefund(ctx, p, res, "reconcile")
			changed = ch
			return ch, msgs, err
		})
	if err != nil {
		return c, fmt.Errorf("confirm refund of %s: %w", paymentID, err)
	}
	if changed {
		c.Action = "applied"
	}
	return c, nil
}
