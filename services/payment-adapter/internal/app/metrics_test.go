package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	paymentpg "github.com/stockflow/stockflow/services/payment-adapter/internal/postgres"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
)

// callbacks reads stockflow.payment.callbacks from r: "provider=…,verdict=…" → count.
func callbacks(t *testing.T, r sdkmetric.Reader) map[string]int64 {
	t.Helper()
	return counter(t, r, "stockflow.payment.callbacks")
}

// Each kind of provider callback is counted under its verdict; a callback that is to be
// retried (its order not known yet) under none.
func TestCallbackVerdictsAreCounted(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(ctx)) })
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	sb, err := sandbox.New("app-test")
	require.NoError(t, err)
	reg, err := payment.NewRegistry(sb)
	require.NoError(t, err)
	svc := app.New(paymentpg.New(pool), reg, slog.New(slog.DiscardHandler), app.WithMeterProvider(mp))
	require.NoError(t, svc.RememberOrder(ctx, inbox.Message{Consumer: "c", ID: "created"},
		events.OrderCreated{OrderID: "ord-1", Total: 9800, Currency: "CNY"}))

	call := func(body string, sign bool) error {
		t.Helper()
		h := http.Header{}
		if sign {
			h.Set(sandbox.SignatureHeader, sb.Sign([]byte(body)))
		} else {
			h.Set(sandbox.SignatureHeader, sb.Sign([]byte(body+" ")))
		}
		_, err := svc.HandleCallback(ctx, "sandbox", h, []byte(body))
		return err
	}
	notice := func(txn, orderID string, amount int64, status string) string {
		return fmt.Sprintf(`{"provider_txn_id":%q,"order_id":%q,"amount":%d,"currency":"CNY","status":%q}`, txn, orderID, amount, status)
	}
	require.NoError(t, call(notice("txn-1", "ord-1", 9800, "succeeded"), true))
	require.NoError(t, call(notice("txn-1", "ord-1", 9800, "succeeded"), true), "replayed")
	require.NoError(t, call(notice("txn-2", "ord-1", 9800, "failed"), true), "declined: a valid new callback too")
	require.ErrorIs(t, call(notice("txn-3", "ord-1", 9800, "succeeded"), false), payment.ErrInvalidSignature)
	require.ErrorIs(t, call(`{"provider_txn_id":"txn-4"}`, true), payment.ErrMalformedNotification)
	require.NoError(t, call(notice("txn-5", "ord-1", 1, "succeeded"), true), "the wrong amount, refunded at once")
	require.ErrorIs(t, call(notice("txn-6", "ord-unknown", 9800, "succeeded"), true), payment.ErrOrderUnknown)

	assert.Equal(t, map[string]int64{
		"provider=sandbox,verdict=accepted": 2, "provider=sandbox,verdict=duplicate": 1, "provider=sandbox,verdict=forged": 1,
		"provider=sandbox,verdict=malformed": 1, "provider=sandbox,verdict=mismatch": 1,
	}, callbacks(t, reader))
}

// Refund confirmations and ignored kinds are counted under their own verdicts, and each refund
// step in stockflow.payment.refunds.
func TestRefundVerdictsAndStepsAreCounted(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(ctx)) })
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	st := newStub("stub-secret")
	st.refundAnswer = payment.RefundPending
	reg, err := payment.NewRegistry(st)
	require.NoError(t, err)
	svc := app.New(paymentpg.New(pool), reg, slog.New(slog.DiscardHandler), app.WithMeterProvider(mp))
	require.NoError(t, svc.RememberOrder(ctx, inbox.Message{Consumer: "c", ID: "created"},
		events.OrderCreated{OrderID: "ord-1", Total: 9800, Currency: "CNY"}))
	call := func(body string) {
		t.Helper()
		_, err := svc.HandleCallback(ctx, "stub", st.sign([]byte(body)), []byte(body))
		require.NoError(t, err)
	}
	call(`{"provider_txn_id":"txn-1","order_id":"ord-1","amount":9800,"currency":"CNY","status":"succeeded"}`)
	ps, err := svc.ListByOrder(ctx, "ord-1")
	require.NoError(t, err)
	require.NoError(t, svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf"}, ps[0].ID(), "sell_failed"))
	require.NoError(t, svc.ExecuteRefund(ctx, inbox.Message{}, events.PaymentRefundRequested{PaymentID: ps[0].ID(), OrderID: "ord-1", RefundID: "refund-" + ps[0].ID()}))
	call(`{"event":"other"}`)
	call(string(refundNotice("txn-1", "refund-other", "", "succeeded")))
	call(string(refundNotice("txn-1", "refund-"+ps[0].ID(), "", "pending")))
	call(string(refundNotice("txn-1", "refund-"+ps[0].ID(), "", "succeeded")))

	assert.Equal(t, map[string]int64{
		"provider=stub,verdict=accepted": 1, "provider=stub,verdict=ignored": 1, "provider=stub,verdict=refund_unmatched": 1,
		"provider=stub,verdict=duplicate": 1, "provider=stub,verdict=refund": 1,
	}, callbacks(t, reader))
	assert.Equal(t, map[string]int64{
		"outcome=requested,provider=stub": 1, "outcome=pending,provider=stub": 1, "outcome=succeeded,provider=stub": 1,
	}, counter(t, reader, "stockflow.payment.refunds"))
}

// counter reads the int64 sum name from r: encoded attributes → count.
func counter(t *testing.T, r sdkmetric.Reader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range sum.DataPoints {
					out[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
				}
			}
		}
	}
	return out
}
