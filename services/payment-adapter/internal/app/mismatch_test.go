package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// TestMismatchRefundIsRequestedWithThePaymentAndRetried: a payment of the wrong amount is
// recorded failed, never succeeded, with its refund requested in the same transaction — the
// callback is acknowledged even while the provider's refund API is down — and the refund is
// made, once, when the provider is back. The order hears payment.failed only.
func TestMismatchRefundIsRequestedWithThePaymentAndRetried(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.stub.set(func(s *stub) { s.refundErr = errDown })
	p := e.payVia("stub", "ord-1", "txn-1", 1)
	assert.Equal(t, payment.Failed, p.Status())
	assert.True(t, p.CapturedMismatch())
	assert.Equal(t, payment.RefundRequested, p.Refund().State)
	assert.Equal(t, payment.ReasonAmountMismatch, p.Refund().Reason)
	assert.Equal(t, []string{p.ID()}, e.requested())

	errs := e.drive()
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], app.ErrProviderUnavailable)
	assert.Equal(t, payment.Failed, e.status(p.ID()))

	// The provider redelivers the callback meanwhile: a duplicate, no second request.
	body := []byte(`{"provider_txn_id":"txn-1","order_id":"ord-1","amount":1,"currency":"CNY","status":"succeeded"}`)
	res, err := e.svc.HandleCallback(ctx, "stub", e.stub.sign(body), body)
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
	assert.Len(t, e.requested(), 1)

	e.stub.set(func(s *stub) { s.refundErr = nil })
	require.Empty(t, e.drive())
	got := e.get(p.ID())
	assert.Equal(t, payment.Refunded, got.Status())
	assert.Equal(t, "refund-"+p.ID(), got.Refund().ID)
	assert.Equal(t, 1, e.stub.callsOf("refund-"+p.ID())-1, "one failed call, one that refunded")
	assert.Empty(t, outboxOf[events.PaymentSucceeded](t, e.pool, events.SubjectPaymentSucceeded), "never sold")
	assert.Empty(t, e.refunded(), "the order is told by payment.failed only")
	assert.Len(t, outboxOf[events.PaymentFailed](t, e.pool, events.SubjectPaymentFailed), 1)
}
