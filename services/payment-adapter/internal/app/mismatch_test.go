package app_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	paymentpg "github.com/stockflow/stockflow/services/payment-adapter/internal/postgres"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
)

// flakyRefunds is the sandbox provider whose refund API is down while down is set.
type flakyRefunds struct {
	*sandbox.Provider
	down bool
}

func (f *flakyRefunds) Refund(ctx context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	if f.down {
		return payment.RefundResult{}, errors.New("refund API unavailable")
	}
	return f.Provider.Refund(ctx, r)
}

// TestMismatchRefundIsRetriedByTheProvidersRedelivery: when the refund of a wrong-amount
// payment fails, the callback fails (the provider redelivers it); the payment is recorded
// failed, never succeeded, and the redelivery refunds it, once.
func TestMismatchRefundIsRetriedByTheProvidersRedelivery(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	sb, err := sandbox.New("app-test")
	require.NoError(t, err)
	flaky := &flakyRefunds{Provider: sb, down: true}
	reg, err := payment.NewRegistry(flaky)
	require.NoError(t, err)
	svc := app.New(paymentpg.New(pool), reg, slog.New(slog.DiscardHandler))
	require.NoError(t, svc.RememberOrder(ctx, inbox.Message{Consumer: "c", ID: "created"},
		events.OrderCreated{OrderID: "ord-1", Total: 4900, Currency: "CNY"}))
	body := []byte(`{"provider_txn_id":"txn-1","order_id":"ord-1","amount":1,"currency":"CNY","status":"succeeded"}`)
	h := http.Header{}
	h.Set(sandbox.SignatureHeader, sb.Sign(body))

	_, err = svc.HandleCallback(ctx, "sandbox", h, body)
	require.Error(t, err, "not acknowledged: the provider will redeliver")
	ps, err := svc.ListByOrder(ctx, "ord-1")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, payment.Failed, ps[0].Status())
	assert.True(t, ps[0].CapturedMismatch())

	flaky.down = false
	res, err := svc.HandleCallback(ctx, "sandbox", h, body)
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
	assert.Equal(t, payment.Refunded, res.Payment.Status())
	assert.Equal(t, "refund-"+ps[0].ID(), res.Payment.Refund().ID)
	var succeeded, refunded int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE subject = $1), count(*) FILTER (WHERE subject = $2) FROM outbox`,
		events.SubjectPaymentSucceeded, events.SubjectPaymentRefunded).Scan(&succeeded, &refunded))
	assert.Zero(t, succeeded, "never sold")
	assert.Zero(t, refunded, "the order is told by payment.failed only")
}
