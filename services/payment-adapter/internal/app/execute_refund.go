package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// ErrProviderUnavailable marks a provider call that failed transiently (the network, a 5xx,
// a timeout, a provider no longer configured): the consumer retries it as an outage, with
// backoff, for as long as natsx's OutageMaxDeliver allows — and the unconfirmed refunds job
// asks again after that, so a refund is never dropped.
var ErrProviderUnavailable = errors.New("payment provider unavailable")

// ErrRefundUnknown is returned by ExecuteRefund for a payment.refund_requested whose payment
// or refund does not exist, or is another refund: payment-adapter writes the event in the
// transaction that records the refund, so this is a bug or a forged message, never a race
// (the consumer dead-letters it for a human).
var ErrRefundUnknown = errors.New("refund request of an unknown refund")

// ExecuteRefund is the second step of a refund — payment.refund_requested: it asks the
// payment's provider for the requested refund, outside any transaction, with the refund id
// as the provider's idempotency key, and applies the answer in one transaction: succeeded →
// the payment is refunded and payment.refunded emitted; pending → the refund waits for the
// provider's notification or the unconfirmed refunds job; failed, or the provider refusing
// (payment.ErrProviderRefused) → the refund is failed, for a human (metric, log, read API).
// A transient failure records the attempt (attempts, last error, next attempt time) and
// returns an error wrapping ErrProviderUnavailable, so the message is retried.
//
// A refund no longer requested — pending, succeeded or failed by an earlier delivery, a
// notification or the job — is acknowledged and not asked again.
func (s *Service) ExecuteRefund(ctx context.Context, _ inbox.Message, ev events.PaymentRefundRequested) error {
	p, err := s.store.Get(ctx, ev.PaymentID)
	if errors.Is(err, payment.ErrNotFound) {
		return fmt.Errorf("execute refund %s: %w: %w", ev.RefundID, ErrRefundUnknown, err)
	}
	if err != nil {
		return fmt.Errorf("execute refund %s: %w", ev.RefundID, err)
	}
	r := p.Refund()
	if r == nil || r.ID != ev.RefundID || p.OrderID() != ev.OrderID {
		return fmt.Errorf("execute refund %s: %w: payment %s has no such refund", ev.RefundID, ErrRefundUnknown, p.ID())
	}
	if r.State != payment.RefundRequested {
		s.log.DebugContext(ctx, "refund no longer requested; not asked again", "payment_id", p.ID(), "refund_status", r.State.String())
		return nil
	}
	if _, err := s.askRefund(ctx, p, "request"); err != nil {
		return fmt.Errorf("execute refund %s: %w", ev.RefundID, err)
	}
	return nil
}

// askRefund asks p's provider for p's refund (Refund: the provider's idempotency key makes a
// repeat safe) and applies the answer; it returns the refund as stored afterwards. A
// transient failure is recorded as an attempt and returned wrapping ErrProviderUnavailable.
func (s *Service) askRefund(ctx context.Context, p *payment.Payment, source string) (*payment.Refund, error) {
	res, callErr := s.callRefund(ctx, p)
	var out *payment.Refund
	_, err := s.store.UpdatePayments(ctx, nil, Selector{PaymentID: p.ID()},
		func(p *payment.Payment) (bool, []events.Message, error) {
			defer func() { out = p.Refund() }()
			if callErr != nil {
				now := s.now()
				attempts := p.Refund().Attempts + 1
				return p.RefundAttemptFailed(callErr.Error(), now, now.Add(natsx.RetryDelay(uint64(attempts)))), nil, nil
			}
			return s.applyRefund(ctx, p, res, source)
		})
	if err != nil {
		return nil, errors.Join(callErr, err)
	}
	if callErr != nil {
		s.rec.refund(ctx, p.Provider(), refundRetry)
		s.log.WarnContext(ctx, "provider refund call failed; retrying", "payment_id", p.ID(), "provider", p.Provider(),
			"refund_id", out.ID, "attempts", out.Attempts, "err", callErr)
		return out, callErr
	}
	return out, nil
}

// callRefund is the provider call of p's refund. A refusal becomes a failed result; any other
// error wraps ErrProviderUnavailable.
func (s *Service) callRefund(ctx context.Context, p *payment.Payment) (payment.RefundResult, error) {
	rf, err := s.providers.Refunder(p.Provider())
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("%w: %w", ErrProviderUnavailable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, providerTimeout)
	defer cancel()
	res, err := rf.Refund(ctx, refundRequest(p))
	switch {
	case errors.Is(err, payment.ErrProviderRefused):
		return payment.RefundResult{Status: payment.RefundFailed, Reason: err.Error()}, nil
	case err != nil:
		return payment.RefundResult{}, fmt.Errorf("%w: provider %s refund: %w", ErrProviderUnavailable, p.Provider(), err)
	}
	return res, nil
}

// providerTimeout bounds one call to a provider's API: well inside the consumer's AckWait.
const providerTimeout = 15 * time.Second
