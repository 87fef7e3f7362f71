package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/app"
)

func (e *env) written(t *testing.T) int {
	t.Helper()
	return e.count(t, `SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM order_items)
		+ (SELECT count(*) FROM order_history) + (SELECT count(*) FROM outbox)`)
}

func TestPutAndGetPrice(t *testing.T) {
	e := setup(t)
	put := e.do(t, http.MethodPut, "/v1/prices/CUP-9", nil, `{"unit_price": 4900, "currency": "CNY", "payment_window": "10m"}`)
	require.Equal(t, http.StatusOK, put.status, "%v", put.body)
	want := map[string]any{"sku": "CUP-9", "unit_price": float64(4900), "currency": "CNY", "payment_window": "10m0s",
		"updated_at": "2026-12-02T10:00:00Z", "updated_by": "ops"}
	assert.Equal(t, want, put.body, "the operator is the token's subject")

	buyer := map[string]string{"Authorization": e.kit.Bearer("u1", auth.Buyer)}
	got := e.do(t, http.MethodGet, "/v1/prices/CUP-9", buyer, "")
	require.Equal(t, http.StatusOK, got.status, "%v", got.body)
	assert.Equal(t, want, got.body, "any token reads a price")

	// Another PUT replaces the terms, window included.
	e.now = e.now.Add(time.Minute)
	again := e.do(t, http.MethodPut, "/v1/prices/CUP-9", nil, `{"unit_price": 5900, "currency": "CNY"}`)
	require.Equal(t, http.StatusOK, again.status, "%v", again.body)
	assert.NotContains(t, again.body, "payment_window", "none of its own: the default")
	assert.Equal(t, float64(5900), e.do(t, http.MethodGet, "/v1/prices/CUP-9", nil, "").body["unit_price"])

	missing := e.do(t, http.MethodGet, "/v1/prices/NOPE", nil, "")
	assert.Equal(t, http.StatusNotFound, missing.status)
	assert.Equal(t, "price_not_found", missing.code())
}

func TestPutPriceRefusesBadTermsAndWritesNothing(t *testing.T) {
	e := setupWith(t, app.Policy{PaymentWindow: 30 * time.Minute, MinPaymentWindow: time.Minute})
	before := e.do(t, http.MethodGet, "/v1/prices/CUP-1", nil, "").body
	for _, tc := range []struct {
		name, sku, body string
		header          map[string]string
		status          int
		code            string
	}{
		{"free", "CUP-1", `{"unit_price": 0, "currency": "CNY"}`, nil, 422, "invalid_unit_price"},
		{"negative", "CUP-1", `{"unit_price": -1, "currency": "CNY"}`, nil, 422, "invalid_unit_price"},
		{"no currency", "CUP-1", `{"unit_price": 4900}`, nil, 422, "invalid_currency"},
		{"lower-case currency", "CUP-1", `{"unit_price": 4900, "currency": "cny"}`, nil, 422, "invalid_currency"},
		{"window below ORDER_MIN_PAYMENT_WINDOW", "CUP-1", `{"unit_price": 4900, "currency": "CNY", "payment_window": "30s"}`, nil, 422, "invalid_payment_window"},
		{"window above 24h", "CUP-1", `{"unit_price": 4900, "currency": "CNY", "payment_window": "25h"}`, nil, 422, "invalid_payment_window"},
		{"window not a duration", "CUP-1", `{"unit_price": 4900, "currency": "CNY", "payment_window": "soon"}`, nil, 422, "invalid_payment_window"},
		{"bad sku", "-x", `{"unit_price": 4900, "currency": "CNY"}`, nil, 422, "invalid_sku"},
		{"unknown field", "CUP-1", `{"unit_price": 4900, "currency": "CNY", "discount": 1}`, nil, 400, "malformed_json"},
		{"a buyer", "CUP-1", `{"unit_price": 1, "currency": "CNY"}`, map[string]string{"Authorization": e.kit.Bearer("u1", auth.Buyer)}, 403, "forbidden"},
		{"a viewer", "CUP-1", `{"unit_price": 1, "currency": "CNY"}`, map[string]string{"Authorization": e.kit.Bearer("vera", auth.Viewer)}, 403, "forbidden"},
		{"no token", "CUP-1", `{"unit_price": 1, "currency": "CNY"}`, map[string]string{"Authorization": ""}, 401, "unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.do(t, http.MethodPut, "/v1/prices/"+tc.sku, tc.header, tc.body)
			assert.Equal(t, tc.status, resp.status, "%v", resp.body)
			assert.Equal(t, tc.code, resp.code())
			assert.Equal(t, before, e.do(t, http.MethodGet, "/v1/prices/CUP-1", nil, "").body)
			assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM sku_price`))
		})
	}
}

// TestPlacementIsPricedByTheList: the lines' prices, the total and the currency are the
// list's; the request need not say them, and order.created carries the server's figures.
func TestPlacementIsPricedByTheList(t *testing.T) {
	e := setup(t)
	resp := e.place(t, "k", `{"items": [{"sku": "CUP-1", "qty": 2}, {"sku": "MUG-2", "qty": 3}]}`)
	require.Equal(t, http.StatusCreated, resp.status, "%v", resp.body)
	assert.Equal(t, "u1", resp.body["buyer_id"], "the token's buyer")
	assert.Equal(t, float64(2*4900+3*100), resp.body["total"])
	assert.Equal(t, "CNY", resp.body["currency"])
	assert.Equal(t, []any{
		map[string]any{"sku": "CUP-1", "qty": float64(2), "unit_price": float64(4900)},
		map[string]any{"sku": "MUG-2", "qty": float64(3), "unit_price": float64(100)},
	}, resp.body["items"])
	created := e.outbox(t, events.SubjectOrderCreated)
	require.Len(t, created, 1)
	_, ev, err := events.Decode[events.OrderCreated]([]byte(created[0]))
	require.NoError(t, err)
	assert.Equal(t, int64(10100), ev.Total, "payment-adapter checks payments against this")
	assert.Equal(t, "CNY", ev.Currency)

	// A new price applies to the next order at once; the order placed keeps its own.
	e.putPrice(t, "CUP-1", `{"unit_price": 3900, "currency": "CNY"}`)
	next := e.place(t, "k2", `{"items": [{"sku": "CUP-1", "qty": 1, "unit_price": 3900}]}`)
	require.Equal(t, http.StatusCreated, next.status, "%v", next.body)
	assert.Equal(t, float64(3900), next.body["total"])
	assert.Equal(t, float64(10100), e.do(t, http.MethodGet, "/v1/orders/"+resp.body["order_id"].(string), nil, "").body["total"])
}

// TestPriceTamperingIsRefused: F3's attack, 1 fen for a 4,900-fen cup, is a 409 naming the
// SKU and both prices; no order, no line, no event.
func TestPriceTamperingIsRefused(t *testing.T) {
	e := setup(t)
	for _, body := range []string{
		`{"items": [{"sku": "CUP-1", "qty": 1, "unit_price": 1}], "currency": "CNY"}`,
		`{"items": [{"sku": "CUP-1", "qty": 1, "unit_price": 0}]}`,
		`{"items": [{"sku": "MUG-2", "qty": 1}, {"sku": "CUP-1", "qty": 50, "unit_price": 4899}]}`,
	} {
		resp := e.place(t, "k", body)
		require.Equal(t, http.StatusConflict, resp.status, "%v", resp.body)
		assert.Equal(t, "price_mismatch", resp.code())
		assert.Contains(t, resp.message(), "CUP-1")
		assert.Contains(t, resp.message(), "4900")
		assert.Equal(t, 0, e.written(t), "nothing written, no event")
	}
	unpriced := e.place(t, "k", `{"items": [{"sku": "CUP-1", "qty": 1}, {"sku": "SECRET-1", "qty": 1, "unit_price": 1}]}`)
	assert.Equal(t, http.StatusUnprocessableEntity, unpriced.status)
	assert.Equal(t, "sku_not_for_sale", unpriced.code())
	assert.Contains(t, unpriced.message(), "SECRET-1")
	assert.Equal(t, 0, e.written(t))
}

func TestLinesOfTwoCurrenciesAreRefused(t *testing.T) {
	e := setup(t)
	e.putPrice(t, "HAT-3", `{"unit_price": 1500, "currency": "USD"}`)
	resp := e.place(t, "k", `{"items": [{"sku": "CUP-1", "qty": 1}, {"sku": "HAT-3", "qty": 1}]}`)
	assert.Equal(t, http.StatusUnprocessableEntity, resp.status, "%v", resp.body)
	assert.Equal(t, "currency_mismatch", resp.code())
	assert.Contains(t, resp.message(), "HAT-3 is priced in USD")
	ok := e.place(t, "k", `{"items": [{"sku": "HAT-3", "qty": 1}], "currency": "USD"}`)
	assert.Equal(t, http.StatusCreated, ok.status, "%v", ok.body)
	assert.Equal(t, "USD", ok.body["currency"])
}

// TestPaymentWindowIsTheServers: the default, a SKU's own window (the shortest of the
// lines'), and a request that may only shorten it.
func TestPaymentWindowIsTheServers(t *testing.T) {
	e := setupWith(t, app.Policy{PaymentWindow: 30 * time.Minute, MinPaymentWindow: time.Minute})
	e.putPrice(t, "PROMO-1", `{"unit_price": 990, "currency": "CNY", "payment_window": "10m"}`)
	e.putPrice(t, "SLOW-1", `{"unit_price": 990, "currency": "CNY", "payment_window": "2h"}`)
	for _, tc := range []struct {
		name, items, timeout string
		status               int
		want                 string // payment_timeout, or the error code
	}{
		{"the default", `{"sku": "CUP-1", "qty": 1}`, "", 201, "30m0s"},
		{"the SKU's window", `{"sku": "PROMO-1", "qty": 1}`, "", 201, "10m0s"},
		{"a SKU's longer window", `{"sku": "SLOW-1", "qty": 1}`, "", 201, "2h0m0s"},
		{"the shortest line's", `{"sku": "CUP-1", "qty": 1}, {"sku": "PROMO-1", "qty": 1}`, "", 201, "10m0s"},
		{"shortened by the request", `{"sku": "PROMO-1", "qty": 1}`, `"5m"`, 201, "5m0s"},
		{"the window itself", `{"sku": "CUP-1", "qty": 1}`, `"30m"`, 201, "30m0s"},
		{"24h: one bot holding a sale for a day", `{"sku": "CUP-1", "qty": 1}`, `"24h"`, 422, "payment_timeout_too_long"},
		{"longer than the SKU's", `{"sku": "PROMO-1", "qty": 1}`, `"11m"`, 422, "payment_timeout_too_long"},
		{"below ORDER_MIN_PAYMENT_WINDOW", `{"sku": "CUP-1", "qty": 1}`, `"30s"`, 422, "invalid_payment_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"items": [` + tc.items + `]`
			if tc.timeout != "" {
				body += `, "payment_timeout": ` + tc.timeout
			}
			before := e.written(t)
			resp := e.place(t, "k-"+tc.name, body+`}`)
			require.Equal(t, tc.status, resp.status, "%v", resp.body)
			if tc.status != http.StatusCreated {
				assert.Equal(t, tc.want, resp.code())
				assert.Equal(t, before, e.written(t))
				return
			}
			assert.Equal(t, tc.want, resp.body["payment_timeout"])
			window, err := time.ParseDuration(tc.want)
			require.NoError(t, err)
			assert.Equal(t, e.now.Add(window).Format(time.RFC3339), resp.body["expires_at"])
		})
	}
}

// TestRateLimitedPlacementIs429 with Retry-After, and writes nothing: per buyer, and per SKU.
func TestRateLimitedPlacementIs429(t *testing.T) {
	e := setupWith(t, app.Policy{PaymentWindow: 30 * time.Minute,
		PerBuyer: app.RateLimit{Rate: 0.5, Burst: 2}, PerSKU: app.RateLimit{Rate: 1, Burst: 3}})
	as := func(buyer string) string {
		return `{"buyer_id": "` + buyer + `", "items": [{"sku": "CUP-1", "qty": 1}]}`
	}
	for i, k := range []string{"a", "b"} {
		require.Equal(t, http.StatusCreated, e.place(t, k, as("u1")).status, "burst order %d", i)
	}
	before := e.written(t)
	limited := e.place(t, "c", as("u1"))
	require.Equal(t, http.StatusTooManyRequests, limited.status, "%v", limited.body)
	assert.Equal(t, "rate_limited", limited.code())
	assert.Contains(t, limited.message(), "buyer u1")
	assert.Equal(t, "2", limited.header.Get("Retry-After"), "one token at 0.5/s")
	assert.Equal(t, before, e.written(t), "nothing written")

	// The SKU's bucket (3) has one token left: u2 takes it, u3 waits — and u3's own bucket is
	// given back its token, so u3 is not charged for the order refused.
	require.Equal(t, http.StatusCreated, e.place(t, "d", as("u2")).status)
	sku := e.place(t, "e", as("u3"))
	require.Equal(t, http.StatusTooManyRequests, sku.status, "%v", sku.body)
	assert.Contains(t, sku.message(), "sku CUP-1")
	assert.Equal(t, "1", sku.header.Get("Retry-After"))

	// Time passes: the buckets refill.
	e.now = e.now.Add(2 * time.Second)
	assert.Equal(t, http.StatusCreated, e.place(t, "c", as("u1")).status, "the retry of the refused order")
	assert.Equal(t, http.StatusCreated, e.place(t, "e", as("u3")).status)
	assert.Equal(t, 5, e.count(t, `SELECT count(*) FROM orders`))
}

// TestReplayAfterAPriceChangeIsTheSameOrder: a retry of a placed order replays it at the price
// it was placed at, however the list changed since.
func TestReplayAfterAPriceChangeIsTheSameOrder(t *testing.T) {
	e := setup(t)
	body := `{"items": [{"sku": "CUP-1", "qty": 1}]}`
	first := e.place(t, "k", body)
	require.Equal(t, http.StatusCreated, first.status)
	e.putPrice(t, "CUP-1", `{"unit_price": 100, "currency": "CNY"}`)
	again := e.place(t, "k", body)
	require.Equal(t, http.StatusOK, again.status, "%v", again.body)
	assert.Equal(t, first.body, again.body, "4900, as placed")
}
