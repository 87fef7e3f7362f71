package app_test

import (
	"context"
	"fmt"
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

// TestASuccessAfterADeclineOfTheSameTransactionPays is review F11's second point: Stripe lets
// a buyer try again on the same PaymentIntent after a failed attempt, so one provider
// transaction is reported failed, then succeeded. The success is not a duplicate to ignore
// (the buyer paid, and nothing would sell or refund it): the payment becomes succeeded and
// payment.succeeded is emitted, once. A success for the wrong amount after a decline is a
// mismatch whose refund is requested.
func TestASuccessAfterADeclineOfTheSameTransactionPays(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	callback := func(orderID, txn string, amount int, status string) app.CallbackResult {
		t.Helper()
		body := fmt.Appendf(nil, `{"provider_txn_id":%q,"order_id":%q,"amount":%d,"currency":"CNY","status":%q}`, txn, orderID, amount, status)
		res, err := e.svc.HandleCallback(ctx, "stub", e.stub.sign(body), body)
		require.NoError(t, err)
		return res
	}
	e.order("ord-1")
	declined := callback("ord-1", "pi-1", 9800, "failed")
	require.False(t, declined.Duplicate)
	require.Equal(t, payment.Failed, declined.Payment.Status())

	paid := callback("ord-1", "pi-1", 9800, "succeeded")
	assert.False(t, paid.Duplicate, "the success is news")
	assert.Equal(t, declined.Payment.ID(), paid.Payment.ID(), "the same payment")
	assert.Equal(t, payment.Succeeded, e.status(paid.Payment.ID()))
	assert.True(t, callback("ord-1", "pi-1", 9800, "succeeded").Duplicate, "a repeat of the success")
	assert.True(t, callback("ord-1", "pi-1", 9800, "failed").Duplicate, "a late repeat of the decline")
	assert.Equal(t, payment.Succeeded, e.status(paid.Payment.ID()))
	succeeded := outboxOf[events.PaymentSucceeded](t, e.pool, events.SubjectPaymentSucceeded)
	require.Len(t, succeeded, 1)
	assert.Equal(t, paid.Payment.ID(), succeeded[0].PaymentID)
	assert.Len(t, outboxOf[events.PaymentFailed](t, e.pool, events.SubjectPaymentFailed), 1, "the decline's own")

	e.order("ord-2")
	callback("ord-2", "pi-2", 9800, "failed")
	short := callback("ord-2", "pi-2", 9700, "succeeded")
	assert.False(t, short.Duplicate)
	assert.True(t, short.Payment.CapturedMismatch())
	assert.Equal(t, []string{short.Payment.ID()}, e.requested(), "the money taken for the wrong amount goes back")
	assert.Len(t, outboxOf[events.PaymentSucceeded](t, e.pool, events.SubjectPaymentSucceeded), 1, "never sold")
}
