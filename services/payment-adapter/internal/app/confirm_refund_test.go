package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// TestConfirmRefundActsOnTheProvidersWord: a pending refund's query says pending (left), then
// succeeded (completed, one payment.refunded); check mode only looks.
func TestConfirmRefundActsOnTheProvidersWord(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.stub.set(func(s *stub) { s.refundAnswer = payment.RefundPending })
	p := e.payVia("stub", "ord-1", "txn-1", 9800)
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf"}, p.ID(), "sell_failed"))
	require.Empty(t, e.drive())

	c, err := e.svc.ConfirmRefund(ctx, p.ID(), true)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundPending, c.Queried.Status)
	assert.Empty(t, c.Action, "pending stays pending")

	e.stub.settle("refund-"+p.ID(), payment.RefundSucceeded)
	c, err = e.svc.ConfirmRefund(ctx, p.ID(), false)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundSucceeded, c.Queried.Status)
	assert.Empty(t, c.Action, "check mode changes nothing")
	assert.Equal(t, payment.RefundInProgress, e.refundState(p.ID()))

	c, err = e.svc.ConfirmRefund(ctx, p.ID(), true)
	require.NoError(t, err)
	assert.Equal(t, "applied", c.Action)
	assert.Equal(t, payment.RefundDone, c.After.State)
	assert.Equal(t, payment.Refunded, e.status(p.ID()))
	c, err = e.svc.ConfirmRefund(ctx, p.ID(), true)
	require.NoError(t, err)
	assert.Empty(t, c.Action, "no longer open")
	assert.Equal(t, []string{p.ID()}, e.refunded())
}

// TestConfirmRefundRequestsAgainWhatTheProviderNeverGot: the request never reached the
// provider (its API was down past every retry): the query finds nothing, and repair asks
// again under the same refund id.
func TestConfirmRefundRequestsAgainWhatTheProviderNeverGot(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.stub.set(func(s *stub) { s.refundErr = errDown })
	p := e.payVia("stub", "ord-1", "txn-1", 9800)
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf"}, p.ID(), "sell_failed"))
	require.Len(t, e.drive(), 1)

	c, err := e.svc.ConfirmRefund(ctx, p.ID(), true)
	assert.ErrorIs(t, err, app.ErrProviderUnavailable, "still down: the attempt is recorded")
	assert.True(t, c.NotFound)
	assert.Equal(t, 2, e.get(p.ID()).Refund().Attempts)

	e.stub.set(func(s *stub) { s.refundErr = nil })
	c, err = e.svc.ConfirmRefund(ctx, p.ID(), true)
	require.NoError(t, err)
	assert.Equal(t, "requested", c.Action)
	assert.Equal(t, payment.RefundDone, c.After.State)
	assert.Equal(t, []string{p.ID()}, e.refunded())
	assert.Equal(t, 3, e.stub.callsOf("refund-"+p.ID()), "two failed calls and the one that refunded, all under one refund id")

	e.stub.set(func(s *stub) { s.queryErr = errDown })
	_, err = e.svc.ConfirmRefund(ctx, p.ID(), true)
	assert.NoError(t, err, "a refund no longer open is not queried")
}

// A failed query (the provider down) is an error, nothing changed; a provider refusing the
// query marks the refund failed.
func TestConfirmRefundQueryFailures(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.stub.set(func(s *stub) { s.refundAnswer = payment.RefundPending })
	p := e.payVia("stub", "ord-1", "txn-1", 9800)
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf"}, p.ID(), "sell_failed"))
	require.Empty(t, e.drive())
	e.stub.set(func(s *stub) { s.queryErr = errDown })
	_, err := e.svc.ConfirmRefund(ctx, p.ID(), true)
	assert.ErrorIs(t, err, app.ErrProviderUnavailable)
	assert.Equal(t, payment.RefundInProgress, e.refundState(p.ID()))
	e.stub.set(func(s *stub) { s.queryErr = payment.ErrProviderRefused })
	c, err := e.svc.ConfirmRefund(ctx, p.ID(), true)
	require.NoError(t, err)
	assert.Equal(t, "applied", c.Action)
	assert.Equal(t, payment.RefundRefused, e.refundState(p.ID()))
}
