package stripetest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe/stripetest"
)

// call makes a raw API request to the double, as stripe-go would, and returns the status,
// the headers and the decoded body.
func call(t *testing.T, srv *stripetest.Server, method, path, key string, form url.Values, hdr map[string]string) (int, http.Header, map[string]any) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(form.Encode())
	} else if len(form) > 0 {
		path += "?" + form.Encode()
	}
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL()+path, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := srv.Config().HTTPClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	return res.StatusCode, res.Header, out
}

func errorOf(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	require.True(t, ok, "a Stripe error object: %v", body)
	return e
}

func TestTheDoubleChecksTheAPIKey(t *testing.T) {
	srv := stripetest.New(t)
	for _, key := range []string{"", "sk_test_other"} {
		status, _, body := call(t, srv, http.MethodGet, "/v1/refunds", key, nil, nil)
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Equal(t, "invalid_request_error", errorOf(t, body)["type"])
	}
	assert.Zero(t, srv.Calls(http.MethodGet, "/v1/refunds"), "unauthenticated requests are not counted")
}

func TestTheDoubleReplaysAnIdempotencyKeyAndRefusesItWithOtherParameters(t *testing.T) {
	srv := stripetest.New(t)
	key := srv.Config().APIKey
	pi := srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "o-1", Amount: 500, Currency: "EUR"})
	form := url.Values{"payment_intent": {pi}, "amount": {"500"}, "metadata[refund_id]": {"r-1"}}
	idem := map[string]string{"Idempotency-Key": "r-1"}

	status, h, first := call(t, srv, http.MethodPost, "/v1/refunds", key, form, idem)
	require.Equal(t, http.StatusOK, status, first)
	assert.Empty(t, h.Get("Idempotent-Replayed"))
	assert.Equal(t, "eur", first["currency"])
	srv.CompleteRefund(first["id"].(string), "failed")

	status, h, again := call(t, srv, http.MethodPost, "/v1/refunds", key, form, idem)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "true", h.Get("Idempotent-Replayed"))
	assert.Equal(t, first, again, "the first answer, although the refund failed since")

	form.Set("amount", "400")
	status, _, body := call(t, srv, http.MethodPost, "/v1/refunds", key, form, idem)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "idempotency_error", errorOf(t, body)["type"])
	assert.Len(t, srv.Refunds(), 1)
	assert.Equal(t, 3, srv.RefundCalls())
}

func TestTheDoubleAnswersStripeErrors(t *testing.T) {
	srv := stripetest.New(t)
	key := srv.Config().APIKey
	pi := srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "o-1", Amount: 500, Currency: "usd"})
	tests := []struct {
		name, method, path string
		form               url.Values
		status             int
		code               string
	}{
		{"unknown parameter", http.MethodPost, "/v1/refunds", url.Values{"payment_intent": {pi}, "charge": {"ch_1"}}, 400, "parameter_unknown"},
		{"no intent", http.MethodPost, "/v1/refunds", url.Values{"amount": {"1"}}, 400, "parameter_missing"},
		{"unknown intent", http.MethodPost, "/v1/refunds", url.Values{"payment_intent": {"pi_x"}}, 404, "resource_missing"},
		{"too much", http.MethodPost, "/v1/refunds", url.Values{"payment_intent": {pi}, "amount": {"501"}}, 400, "amount_too_large"},
		{"list of an unknown intent", http.MethodGet, "/v1/refunds", url.Values{"payment_intent": {"pi_x"}}, 404, "resource_missing"},
		{"a query it does not understand", http.MethodGet, "/v1/payment_intents/search", url.Values{"query": {"status:'succeeded'"}}, 400, "parameter_invalid"},
		{"an unknown path", http.MethodGet, "/v1/charges", nil, 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := call(t, srv, tc.method, tc.path, key, tc.form, nil)
			assert.Equal(t, tc.status, status)
			e := errorOf(t, body)
			assert.Equal(t, "invalid_request_error", e["type"])
			if tc.code != "" {
				assert.Equal(t, tc.code, e["code"])
			}
		})
	}

	status, _, _ := call(t, srv, http.MethodPost, "/v1/refunds", key, url.Values{"payment_intent": {pi}}, nil)
	require.Equal(t, http.StatusOK, status, "the whole amount when none is given")
	status, _, body := call(t, srv, http.MethodPost, "/v1/refunds", key, url.Values{"payment_intent": {pi}}, nil)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "charge_already_refunded", errorOf(t, body)["code"])
}

func TestTheDoubleSearchesByMetadataPageByPage(t *testing.T) {
	srv := stripetest.New(t)
	key := srv.Config().APIKey
	for range 3 {
		srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: `o'1`, Amount: 1, Currency: "usd"})
	}
	srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "o-2", Amount: 1, Currency: "usd"})
	q := url.Values{"query": {`metadata['order_id']:'o\'1'`}, "limit": {"2"}}
	_, _, page := call(t, srv, http.MethodGet, "/v1/payment_intents/search", key, q, nil)
	assert.Equal(t, "search_result", page["object"])
	assert.Len(t, page["data"], 2)
	assert.Equal(t, true, page["has_more"])
	q.Set("page", page["next_page"].(string))
	_, _, page = call(t, srv, http.MethodGet, "/v1/payment_intents/search", key, q, nil)
	assert.Len(t, page["data"], 1)
	assert.Equal(t, false, page["has_more"])
}
