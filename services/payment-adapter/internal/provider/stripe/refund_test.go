package stripe_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe/stripetest"
)

// paid adds a succeeded intent of order ord-1 for 98.00 USD and returns the request for its
// whole refund.
func paid(srv *stripetest.Server) payment.RefundRequest {
	pi := srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "ord-1", Amount: 9800, Currency: "usd"})
	return payment.RefundRequest{RefundID: "refund-pay-1", PaymentID: "pay-1", OrderID: "ord-1", ProviderTxnID: pi,
		Amount: 9800, Currency: "USD", Reason: "stock sold out"}
}

func TestRefundIsIdempotent(t *testing.T) {
	srv, p := setup(t)
	req := paid(srv)
	first, err := p.Refund(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundSucceeded, first.Status)
	again, err := p.Refund(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, first, again)

	assert.Equal(t, 2, srv.RefundCalls())
	refunds := srv.Refunds()
	require.Len(t, refunds, 1, "the Idempotency-Key replays the first refund")
	re := refunds[0]
	assert.Equal(t, first.ProviderRefundID, re.ID)
	assert.Equal(t, req.RefundID, re.IdempotencyKey)
	assert.Equal(t, req.ProviderTxnID, re.PaymentIntent)
	assert.Equal(t, int64(9800), re.Amount)
	assert.Equal(t, "requested_by_customer", re.Reason)
	assert.Equal(t, map[string]string{"refund_id": "refund-pay-1", "payment_id": "pay-1", "order_id": "ord-1", "reason": "stock sold out"}, re.Metadata)
}

func TestRefundAskedAgainAfterTheKeyIsGoneOrWithAnotherReasonIsTheFirstRefund(t *testing.T) {
	tests := []struct {
		name  string
		again func(*stripetest.Server, payment.RefundRequest) payment.RefundRequest
	}{
		{"after 24 h: charge_already_refunded", func(srv *stripetest.Server, r payment.RefundRequest) payment.RefundRequest {
			srv.ExpireIdempotencyKeys()
			return r
		}},
		{"another reason: idempotency_error", func(_ *stripetest.Server, r payment.RefundRequest) payment.RefundRequest {
			r.Reason = "order refund requested"
			return r
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, p := setup(t)
			req := paid(srv)
			srv.SetRefundStatus("pending")
			first, err := p.Refund(t.Context(), req)
			require.NoError(t, err)
			srv.CompleteRefund(first.ProviderRefundID, "succeeded")
			got, err := p.Refund(t.Context(), tc.again(srv, req))
			require.NoError(t, err)
			assert.Equal(t, payment.RefundResult{ProviderRefundID: first.ProviderRefundID, Status: payment.RefundSucceeded}, got)
			assert.Len(t, srv.Refunds(), 1)
		})
	}
}

func TestRefundOfAnIntentRefundedInTheDashboardIsThatRefund(t *testing.T) {
	srv, p := setup(t)
	req := paid(srv)
	dashboard := req
	dashboard.RefundID = "made-by-hand"
	theirs, err := p.Refund(t.Context(), dashboard)
	require.NoError(t, err)
	got, err := p.Refund(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, theirs, got, "the money is back: that refund is the payment's")

	_, err = p.QueryRefund(t.Context(), req)
	assert.ErrorIs(t, err, payment.ErrNotFound, "QueryRefund names only ours")

	// An idempotency error says our key was used, not that the intent is refunded: only our
	// own refund may answer it.
	srv.FailNext(http.MethodPost, "/v1/refunds", http.StatusBadRequest, "idempotency_error", "")
	_, err = p.Refund(t.Context(), req)
	assert.ErrorIs(t, err, payment.ErrProviderRefused)
}

func TestRefundPendingThenCompleted(t *testing.T) {
	srv, p := setup(t)
	req := paid(srv)
	srv.SetRefundStatus("pending")
	res, err := p.Refund(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundPending, res.Status)
	q, err := p.QueryRefund(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, res, q)

	h, body := srv.CompleteRefund(res.ProviderRefundID, "succeeded")
	q, err = p.QueryRefund(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundResult{ProviderRefundID: res.ProviderRefundID, Status: payment.RefundSucceeded}, q)
	n, err := p.Verify(h, body)
	require.NoError(t, err)
	assert.Equal(t, &payment.RefundNotice{RefundID: req.RefundID, ProviderRefundID: res.ProviderRefundID, Status: payment.RefundSucceeded}, n.Refund)
}

func TestRefundStatuses(t *testing.T) {
	for status, want := range map[string]payment.RefundResult{
		"succeeded":       {Status: payment.RefundSucceeded},
		"pending":         {Status: payment.RefundPending},
		"requires_action": {Status: payment.RefundPending},
		"failed":          {Status: payment.RefundFailed, Reason: "failed: declined"},
		"canceled":        {Status: payment.RefundFailed, Reason: "canceled"},
	} {
		t.Run(status, func(t *testing.T) {
			srv, p := setup(t)
			srv.SetRefundStatus(status)
			res, err := p.Refund(t.Context(), paid(srv))
			require.NoError(t, err)
			want.ProviderRefundID = srv.Refunds()[0].ID
			assert.Equal(t, want, res)
		})
	}
}

func TestRefundRefusedOrTransient(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(*stripetest.Server, *payment.RefundRequest)
		refused bool
	}{
		{"unknown intent: resource_missing", func(_ *stripetest.Server, r *payment.RefundRequest) { r.ProviderTxnID = "pi_unknown" }, true},
		{"more than was paid: amount_too_large", func(_ *stripetest.Server, r *payment.RefundRequest) { r.Amount = 9801 }, true},
		{"an intent that never succeeded", func(srv *stripetest.Server, r *payment.RefundRequest) { r.ProviderTxnID = waiting(srv) }, true},
		{"card_error", func(srv *stripetest.Server, _ *payment.RefundRequest) {
			srv.FailNext(http.MethodPost, "/v1/refunds", http.StatusPaymentRequired, "card_error", "expired_card")
		}, true},
		{"api_error", func(srv *stripetest.Server, _ *payment.RefundRequest) {
			srv.FailNext(http.MethodPost, "/v1/refunds", http.StatusInternalServerError, "api_error", "")
		}, false},
		{"rate_limit", func(srv *stripetest.Server, _ *payment.RefundRequest) {
			srv.FailNext(http.MethodPost, "/v1/refunds", http.StatusTooManyRequests, "invalid_request_error", "rate_limit")
		}, false},
		{"lock_timeout, which stripe-go would retry itself", func(srv *stripetest.Server, _ *payment.RefundRequest) {
			srv.FailNext(http.MethodPost, "/v1/refunds", http.StatusTooManyRequests, "invalid_request_error", "lock_timeout")
		}, false},
		{"idempotency_key_in_use", func(srv *stripetest.Server, _ *payment.RefundRequest) {
			srv.FailNext(http.MethodPost, "/v1/refunds", http.StatusConflict, "invalid_request_error", "idempotency_key_in_use")
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, p := setup(t)
			req := paid(srv)
			tc.prepare(srv, &req)
			_, err := p.Refund(t.Context(), req)
			require.Error(t, err)
			assert.Equal(t, tc.refused, errors.Is(err, payment.ErrProviderRefused), "%v", err)
			assert.Equal(t, 1, srv.RefundCalls(), "stripe-go does not retry")
			assert.Empty(t, srv.Refunds())
		})
	}
}

func TestRefundTransientWhenStripeIsNotReachedOrTheKeyIsWrong(t *testing.T) {
	srv := stripetest.New(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	wrongKey := srv.Config()
	wrongKey.APIKey = "sk_test_wrong"
	unreachable := srv.Config()
	unreachable.APIURL = gone.URL
	for name, c := range map[string]stripe.Config{"401": wrongKey, "connection refused": unreachable} {
		t.Run(name, func(t *testing.T) {
			p, err := stripe.New(c)
			require.NoError(t, err)
			req := paid(srv)
			_, err = p.Refund(t.Context(), req)
			require.Error(t, err)
			assert.False(t, errors.Is(err, payment.ErrProviderRefused), "%v", err)
			_, err = p.QueryRefund(t.Context(), req)
			require.Error(t, err)
			assert.False(t, errors.Is(err, payment.ErrProviderRefused) || errors.Is(err, payment.ErrNotFound), "%v", err)
		})
	}
	assert.Empty(t, srv.Refunds())
}

func TestRefundRequestIsCheckedBeforeAnyCall(t *testing.T) {
	srv, p := setup(t)
	good := paid(srv)
	for name, edit := range map[string]func(*payment.RefundRequest){
		"no refund id":       func(r *payment.RefundRequest) { r.RefundID = "" },
		"refund id too long": func(r *payment.RefundRequest) { r.RefundID = string(make([]byte, 256)) },
		"no intent":          func(r *payment.RefundRequest) { r.ProviderTxnID = "" },
		"zero amount":        func(r *payment.RefundRequest) { r.Amount = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			r := good
			edit(&r)
			_, err := p.Refund(t.Context(), r)
			assert.Error(t, err)
			_, err = p.QueryRefund(t.Context(), r)
			assert.Error(t, err)
		})
	}
	assert.Zero(t, srv.RefundCalls())
	assert.Zero(t, srv.Calls(http.MethodGet, "/v1/refunds"))
}

func TestQueryRefund(t *testing.T) {
	t.Run("never asked for", func(t *testing.T) {
		srv, p := setup(t)
		_, err := p.QueryRefund(t.Context(), paid(srv))
		assert.ErrorIs(t, err, payment.ErrNotFound)
	})
	t.Run("unknown intent", func(t *testing.T) {
		srv, p := setup(t)
		req := paid(srv)
		req.ProviderTxnID = "pi_unknown"
		_, err := p.QueryRefund(t.Context(), req)
		assert.ErrorIs(t, err, payment.ErrNotFound)
	})
	t.Run("ours among many, on the last page", func(t *testing.T) {
		srv, p := setup(t)
		pi := srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "ord-1", Amount: 250, Currency: "usd"})
		ours := payment.RefundRequest{RefundID: "ours", ProviderTxnID: pi, Amount: 1}
		want, err := p.Refund(t.Context(), ours)
		require.NoError(t, err)
		for i := range 120 {
			_, err := p.Refund(t.Context(), payment.RefundRequest{RefundID: fmt.Sprint("other-", i), ProviderTxnID: pi, Amount: 1})
			require.NoError(t, err)
		}
		got, err := p.QueryRefund(t.Context(), ours)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		assert.Equal(t, 2, srv.Calls(http.MethodGet, "/v1/refunds"), "two pages of 100")
	})
	t.Run("transient", func(t *testing.T) {
		srv, p := setup(t)
		srv.FailNext(http.MethodGet, "/v1/refunds", http.StatusInternalServerError, "api_error", "")
		_, err := p.QueryRefund(t.Context(), paid(srv))
		require.Error(t, err)
		assert.False(t, errors.Is(err, payment.ErrProviderRefused) || errors.Is(err, payment.ErrNotFound), "%v", err)
	})
}
