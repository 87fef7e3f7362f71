package stripe_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe/stripetest"
)

func TestQueryPayment(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	intent := func(order, status string, at time.Time) stripetest.PaymentIntent {
		return stripetest.PaymentIntent{OrderID: order, Amount: 9800, Currency: "usd", Status: status, Created: at, PaidAt: at.Add(30 * time.Second)}
	}
	tests := []struct {
		name    string
		intents []stripetest.PaymentIntent
		want    int   // index in intents of the succeeded one returned, or -1
		err     error // when want is -1
	}{
		{"succeeded", []stripetest.PaymentIntent{intent("ord-1", "succeeded", t0)}, 0, nil},
		{"a failed attempt, then a paid intent", []stripetest.PaymentIntent{
			intent("ord-1", "requires_payment_method", t0), intent("ord-1", "succeeded", t0.Add(time.Minute)),
		}, 1, nil},
		{"paid twice: the first payment", []stripetest.PaymentIntent{
			intent("ord-1", "succeeded", t0.Add(time.Minute)), intent("ord-1", "succeeded", t0),
		}, 1, nil},
		{"none", nil, -1, payment.ErrNotFound},
		{"only another order's", []stripetest.PaymentIntent{intent("ord-2", "succeeded", t0)}, -1, payment.ErrNotFound},
		{"waiting for the buyer", []stripetest.PaymentIntent{
			intent("ord-1", "requires_payment_method", t0), intent("ord-1", "requires_confirmation", t0),
			intent("ord-1", "requires_action", t0), intent("ord-1", "processing", t0), intent("ord-1", "requires_capture", t0),
		}, -1, payment.ErrNotFound},
		{"canceled", []stripetest.PaymentIntent{intent("ord-1", "canceled", t0)}, -1, payment.ErrNotFound},
		{"succeeded, of a currency that is not ISO 4217", []stripetest.PaymentIntent{{OrderID: "ord-1", Amount: 9800, Currency: "usdx", Created: t0}},
			-1, payment.ErrMalformedNotification},
		{"succeeded, of no amount", []stripetest.PaymentIntent{{OrderID: "ord-1", Currency: "usd", Created: t0}},
			-1, payment.ErrMalformedNotification},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, p := setup(t)
			var ids []string
			for _, pi := range tc.intents {
				ids = append(ids, srv.AddPaymentIntent(pi))
			}
			n, err := p.QueryPayment(t.Context(), "ord-1")
			if tc.want < 0 {
				assert.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, payment.Notification{Provider: "stripe", ProviderTxnID: ids[tc.want], OrderID: "ord-1",
				Amount: 9800, Currency: "USD", Outcome: payment.OutcomeSucceeded, PaidAt: tc.intents[tc.want].PaidAt}, n)
		})
	}
}

func TestQueryPaymentErrors(t *testing.T) {
	t.Run("an order id that cannot be searched is refused before any call", func(t *testing.T) {
		srv, p := setup(t)
		for _, id := range []string{"", "o'1", `o\1`, "o 1", "ord-1' OR status:'succeeded"} {
			_, err := p.QueryPayment(t.Context(), id)
			require.Error(t, err, id)
			assert.False(t, errors.Is(err, payment.ErrNotFound), "%q: %v", id, err)
		}
		assert.Zero(t, srv.Calls(http.MethodGet, "/v1/payment_intents/search"))
	})
	t.Run("an intent of an unknown status", func(t *testing.T) {
		srv, p := setup(t)
		srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "ord-1", Amount: 9800, Currency: "usd", Status: "on_hold"})
		_, err := p.QueryPayment(t.Context(), "ord-1")
		require.Error(t, err)
		assert.False(t, errors.Is(err, payment.ErrNotFound), "%v", err)
	})
	t.Run("transient", func(t *testing.T) {
		srv, p := setup(t)
		srv.FailNext(http.MethodGet, "/v1/payment_intents/search", http.StatusTooManyRequests, "invalid_request_error", "rate_limit")
		_, err := p.QueryPayment(t.Context(), "ord-1")
		require.Error(t, err)
		assert.False(t, errors.Is(err, payment.ErrNotFound) || errors.Is(err, payment.ErrProviderRefused), "%v", err)
	})
}
