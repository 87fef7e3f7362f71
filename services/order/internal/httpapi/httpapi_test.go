package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/httpapi"
	"github.com/stockflow/stockflow/services/order/internal/order"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
)

type env struct {
	kit   *authtest.Kit
	srv   *httptest.Server
	pool  *pgxpool.Pool
	store *postgres.Store
	now   time.Time
}

func setup(t *testing.T) *env {
	t.Helper()
	return setupWith(t, app.Policy{PaymentWindow: 30 * time.Minute})
}

// setupWith is the API under policy (and opts), its clock stopped at e.now, with CUP-1 on
// sale at 4900 CNY and MUG-2 at 100 CNY.
func setupWith(t testing.TB, policy app.Policy, opts ...app.Option) *env {
	t.Helper()
	pool, _ := pgtest.New(t, postgres.Schemas()...)
	store := postgres.New(pool)
	e := &env{pool: pool, store: store, now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := app.New(store, store, log, policy, append([]app.Option{app.WithClock(func() time.Time { return e.now })}, opts...)...)
	e.kit = authtest.New(t)
	e.srv = httptest.NewServer(httpapi.Handler(svc, log, pool.Ping, e.kit.Verifier))
	t.Cleanup(e.srv.Close)
	e.putPrice(t, "CUP-1", `{"unit_price": 4900, "currency": "CNY"}`)
	e.putPrice(t, "MUG-2", `{"unit_price": 100, "currency": "CNY"}`)
	return e
}

// putPrice sets sku's terms as an operator.
func (e *env) putPrice(t testing.TB, sku, body string) {
	t.Helper()
	resp := e.do(t, http.MethodPut, "/v1/prices/"+sku, nil, body)
	require.Equal(t, http.StatusOK, resp.status, "%v", resp.body)
}

type response struct {
	status int
	header http.Header
	body   map[string]any
}

func (r response) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r response) message() string {
	e, _ := r.body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

func (e *env) do(t testing.TB, method, path string, header map[string]string, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	// A placement goes as the buyer its body names; everything else as staff. A test's own
	// Authorization header wins.
	req.Header.Set("Authorization", e.kit.Bearer("ops", auth.Operator, auth.Viewer, auth.Admin))
	var placed struct {
		BuyerID string `json:"buyer_id"`
	}
	if method == "POST" && path == "/v1/orders" {
		if json.Unmarshal([]byte(body), &placed) != nil || placed.BuyerID == "" || len(placed.BuyerID) > 64 {
			placed.BuyerID = "u1"
		}
		req.Header.Set("Authorization", e.kit.Bearer(placed.BuyerID, auth.Buyer))
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := response{status: resp.StatusCode, header: resp.Header}
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out.body), "body %s", raw)
	}
	return out
}

func (e *env) place(t *testing.T, key, body string) response {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return e.do(t, http.MethodPost, "/v1/orders", h, body)
}

func (e *env) count(t *testing.T, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// outbox returns the bodies of the outbox rows of an event type: its subject, or for a keyed
// event (order.created.<key>) that subject followed by a key.
func (e *env) outbox(t *testing.T, subject string) []string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT data FROM outbox WHERE subject = $1 OR subject LIKE $1 || '.%' ORDER BY id`, subject)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var b []byte
		require.NoError(t, rows.Scan(&b))
		out = append(out, string(b))
	}
	require.NoError(t, rows.Err())
	return out
}

const validBody = `{"buyer_id": "u1", "items": [{"sku": "CUP-1", "qty": 2, "unit_price": 4900}, {"sku": "MUG-2", "qty": 1, "unit_price": 100}], "currency": "CNY", "payment_timeout": "10m"}`

func TestPlaceOrder(t *testing.T) {
	e := setup(t)
	resp := e.place(t, "key-1", validBody)
	require.Equal(t, http.StatusCreated, resp.status, "%v", resp.body)
	id := resp.body["order_id"].(string)
	assert.NotEmpty(t, id)
	assert.Equal(t, "/v1/orders/"+id, resp.header.Get("Location"))
	assert.Equal(t, "pending", resp.body["status"])
	assert.Equal(t, float64(9900), resp.body["total"])
	assert.Equal(t, "CNY", resp.body["currency"])
	assert.Equal(t, "2026-12-02T10:10:00Z", resp.body["expires_at"])
	assert.Equal(t, []any{
		map[string]any{"sku": "CUP-1", "qty": float64(2), "unit_price": float64(4900)},
		map[string]any{"sku": "MUG-2", "qty": float64(1), "unit_price": float64(100)},
	}, resp.body["items"])
	assert.Equal(t, []any{map[string]any{"status": "pending", "at": "2026-12-02T10:00:00Z", "reason": "order placed"}}, resp.body["history"])

	created := e.outbox(t, events.SubjectOrderCreated)
	require.Len(t, created, 1)
	env, ev, err := events.Decode[events.OrderCreated]([]byte(created[0]))
	require.NoError(t, err)
	assert.NotEmpty(t, env.ID)
	assert.Equal(t, id, ev.OrderID)
	assert.Equal(t, "u1", ev.BuyerID)
	assert.Equal(t, int64(9900), ev.Total)
	assert.Equal(t, e.now.Add(10*time.Minute), ev.PaymentDeadline)
	assert.Equal(t, []events.OrderItem{{SKU: "CUP-1", Qty: 2, UnitPrice: 4900}, {SKU: "MUG-2", Qty: 1, UnitPrice: 100}}, ev.Items)

	got := e.do(t, http.MethodGet, "/v1/orders/"+id, nil, "")
	require.Equal(t, http.StatusOK, got.status)
	assert.Equal(t, resp.body, got.body)
}

func TestPlaceOrderDefaultsThePaymentTimeout(t *testing.T) {
	e := setup(t)
	resp := e.place(t, "key-1", `{"buyer_id": "u1", "items": [{"sku": "CUP-1", "qty": 1}]}`)
	require.Equal(t, http.StatusCreated, resp.status, "%v", resp.body)
	assert.Equal(t, "30m0s", resp.body["payment_timeout"])
	assert.Equal(t, "2026-12-02T10:30:00Z", resp.body["expires_at"])
}

func TestPlaceOrderRefusesBadRequestsAndWritesNothing(t *testing.T) {
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"sku": "S-%d", "qty": 1, "unit_price": 1}`, i)
		}
		return b.String()
	}
	body := func(items string) string {
		return `{"buyer_id": "u1", "items": [` + items + `], "currency": "CNY"}`
	}
	tests := []struct {
		name   string
		key    string
		body   string
		status int
		code   string
	}{
		{"missing idempotency key", "", validBody, 400, "missing_idempotency_key"},
		{"idempotency key too long", strings.Repeat("k", 256), validBody, 400, "invalid_idempotency_key"},
		{"empty body", "k", ``, 400, "malformed_json"},
		{"malformed json", "k", `{"buyer_id": `, 400, "malformed_json"},
		{"not an object", "k", `[]`, 400, "malformed_json"},
		{"unknown field", "k", `{"buyer_id": "u1", "coupon": "FREE", "items": [{"sku": "A", "qty": 1, "unit_price": 1}], "currency": "CNY"}`, 400, "malformed_json"},
		{"unknown item field", "k", body(`{"sku": "A", "qty": 1, "unit_price": 1, "discount": 1}`), 400, "malformed_json"},
		{"trailing data", "k", validBody + `{}`, 400, "malformed_json"},
		{"qty as a string", "k", body(`{"sku": "A", "qty": "1", "unit_price": 1}`), 400, "malformed_json"},
		{"fractional qty", "k", body(`{"sku": "A", "qty": 1.5, "unit_price": 1}`), 400, "malformed_json"},
		{"price beyond int64", "k", body(`{"sku": "A", "qty": 1, "unit_price": 9223372036854775808}`), 400, "malformed_json"},
		{"body over 1 MiB", "k", `{"buyer_id": "` + strings.Repeat("u", 1<<20) + `"}`, 413, "body_too_large"},
		{"no items", "k", body(``), 422, "invalid_items"},
		{"items null", "k", `{"buyer_id": "u1", "items": null, "currency": "CNY"}`, 422, "invalid_items"},
		{"101 items", "k", body(lines(101)), 422, "invalid_items"},
		{"empty sku", "k", body(`{"sku": "", "qty": 1, "unit_price": 1}`), 422, "invalid_sku"},
		{"sku over 64 chars", "k", body(`{"sku": "` + strings.Repeat("A", 65) + `", "qty": 1, "unit_price": 1}`), 422, "invalid_sku"},
		{"zero qty", "k", body(`{"sku": "A", "qty": 0, "unit_price": 1}`), 422, "invalid_qty"},
		{"qty over 10000", "k", body(`{"sku": "A", "qty": 10001, "unit_price": 1}`), 422, "invalid_qty"},
		{"negative price", "k", body(`{"sku": "A", "qty": 1, "unit_price": -1}`), 422, "invalid_unit_price"},
		{"duplicate sku", "k", body(`{"sku": "A", "qty": 1, "unit_price": 1}, {"sku": "A", "qty": 2, "unit_price": 1}`), 422, "duplicate_sku"},
		{"total overflows", "k", body(`{"sku": "BIG", "qty": 2}`), 422, "total_overflow"},
		{"lower-case currency", "k", `{"buyer_id": "u1", "items": [{"sku": "A", "qty": 1, "unit_price": 1}], "currency": "cny"}`, 422, "invalid_currency"},
		{"a SKU with no price", "k", body(`{"sku": "A", "qty": 1}`), 422, "sku_not_for_sale"},
		{"a quoted price that is not the list's", "k", body(`{"sku": "CUP-1", "qty": 1, "unit_price": 1}`), 409, "price_mismatch"},
		{"another currency than the SKU's", "k", `{"buyer_id": "u1", "items": [{"sku": "CUP-1", "qty": 1}], "currency": "USD"}`, 422, "currency_mismatch"},
		{"timeout longer than the window", "k", `{"buyer_id": "u1", "items": [{"sku": "CUP-1", "qty": 1}], "payment_timeout": "31m"}`, 422, "payment_timeout_too_long"},
		{"timeout not a duration", "k", `{"buyer_id": "u1", "items": [{"sku": "A", "qty": 1, "unit_price": 1}], "currency": "CNY", "payment_timeout": "soon"}`, 422, "invalid_payment_timeout"},
		{"timeout as a number", "k", `{"buyer_id": "u1", "items": [{"sku": "A", "qty": 1, "unit_price": 1}], "currency": "CNY", "payment_timeout": 30}`, 400, "malformed_json"},
		{"timeout below 1s", "k", `{"buyer_id": "u1", "items": [{"sku": "A", "qty": 1, "unit_price": 1}], "currency": "CNY", "payment_timeout": "500ms"}`, 422, "invalid_payment_timeout"},
		{"timeout above 24h", "k", `{"buyer_id": "u1", "items": [{"sku": "A", "qty": 1, "unit_price": 1}], "currency": "CNY", "payment_timeout": "25h"}`, 422, "payment_timeout_too_long"},
		{"negative timeout", "k", `{"buyer_id": "u1", "items": [{"sku": "A", "qty": 1, "unit_price": 1}], "currency": "CNY", "payment_timeout": "-1m"}`, 422, "invalid_payment_timeout"},
	}
	e := setup(t)
	e.putPrice(t, "BIG", fmt.Sprintf(`{"unit_price": %d, "currency": "CNY"}`, int64(math.MaxInt64/2+1)))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.place(t, tc.key, tc.body)
			assert.Equal(t, tc.status, resp.status, "%v", resp.body)
			assert.Equal(t, tc.code, resp.code())
			assert.NotEmpty(t, resp.message())
			assert.Equal(t, "application/json", resp.header.Get("Content-Type"))
			assert.Equal(t, 0, e.count(t, `SELECT count(*) FROM orders`), "nothing written")
			assert.Equal(t, 0, e.count(t, `SELECT count(*) FROM outbox`), "nothing written")
		})
	}
}

func TestPlaceOrderReplayAndConflict(t *testing.T) {
	e := setup(t)
	first := e.place(t, "key-1", validBody)
	require.Equal(t, http.StatusCreated, first.status)

	// The same request, written differently: other whitespace, field order, "600s" for "10m".
	same := `{"currency":"CNY","payment_timeout":"600s","items":[{"unit_price":4900,"qty":2,"sku":"CUP-1"},{"sku":"MUG-2","qty":1,"unit_price":100}],"buyer_id":"u1"}`
	e.now = e.now.Add(time.Minute)
	replay := e.place(t, "key-1", same)
	require.Equal(t, http.StatusOK, replay.status, "%v", replay.body)
	assert.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	assert.Equal(t, first.body, replay.body, "the same order, unchanged")

	conflict := e.place(t, "key-1", strings.Replace(validBody, `"qty": 2`, `"qty": 3`, 1))
	assert.Equal(t, http.StatusConflict, conflict.status)
	assert.Equal(t, "idempotency_conflict", conflict.code())
	assert.Contains(t, conflict.message(), first.body["order_id"])

	other := e.place(t, "key-2", validBody)
	assert.Equal(t, http.StatusCreated, other.status, "another key is another order")
	assert.NotEqual(t, first.body["order_id"], other.body["order_id"])

	assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM orders`))
	assert.Len(t, e.outbox(t, events.SubjectOrderCreated), 2)
}

func TestGetUnknownOrder(t *testing.T) {
	e := setup(t)
	for _, id := range []string{"0193a1b2-0000-7000-8000-000000000000", "x", strings.Repeat("x", 65)} {
		resp := e.do(t, http.MethodGet, "/v1/orders/"+id, nil, "")
		assert.Equal(t, http.StatusNotFound, resp.status, id)
		assert.Equal(t, "order_not_found", resp.code(), id)
	}
}

// moveTo drives order id through outcomes as the consumers would.
func (e *env) moveTo(t *testing.T, id string, steps ...func(*order.Order) (bool, error)) {
	t.Helper()
	for _, step := range steps {
		require.NoError(t, e.store.Update(context.Background(), id, func(o *order.Order) error {
			_, err := step(o)
			return err
		}))
	}
}

var (
	locked = func(o *order.Order) (bool, error) { return o.StockLocked(time.Now()) }
	sold   = func(o *order.Order) (bool, error) { return o.StockSold(time.Now(), false) }
)

func (e *env) action(t *testing.T, id, action, body string) response {
	t.Helper()
	return e.do(t, http.MethodPost, "/v1/orders/"+id+"/"+action, nil, body)
}

func TestCancel(t *testing.T) {
	e := setup(t)
	id := e.place(t, "k1", validBody).body["order_id"].(string)

	resp := e.action(t, id, "cancel", `{"reason": "changed my mind"}`)
	require.Equal(t, http.StatusAccepted, resp.status, "%v", resp.body)
	assert.Equal(t, "pending", resp.body["status"], "stock's release completes the cancel")
	assert.NotNil(t, resp.body["cancel_requested_at"])
	again := e.action(t, id, "cancel", ``)
	assert.Equal(t, http.StatusAccepted, again.status)
	reqs := e.outbox(t, events.SubjectOrderCancelRequested)
	require.Len(t, reqs, 1, "a repeated cancel emits nothing")
	_, ev, err := events.Decode[events.OrderCancelRequested]([]byte(reqs[0]))
	require.NoError(t, err)
	assert.Equal(t, events.OrderCancelRequested{OrderID: id, Reason: "changed my mind"}, ev)

	e.moveTo(t, id, locked, func(o *order.Order) (bool, error) { return o.StockReleased(time.Now(), order.ReleaseCancel) })
	done := e.action(t, id, "cancel", ``)
	assert.Equal(t, http.StatusOK, done.status)
	assert.Equal(t, "cancelled", done.body["status"])
	assert.Len(t, e.outbox(t, events.SubjectOrderCancelRequested), 1)
}

func TestShipAndRefund(t *testing.T) {
	e := setup(t)
	id := e.place(t, "k1", validBody).body["order_id"].(string)
	e.moveTo(t, id, locked, sold)

	resp := e.action(t, id, "ship", ``)
	require.Equal(t, http.StatusOK, resp.status, "%v", resp.body)
	assert.Equal(t, "shipped", resp.body["status"])
	assert.Equal(t, http.StatusOK, e.action(t, id, "ship", ``).status, "a repeated ship is fine")
	require.Len(t, e.outbox(t, events.SubjectOrderShipped), 1, "and emits nothing")

	resp = e.action(t, id, "refund", `{"reason": "broken on arrival"}`)
	require.Equal(t, http.StatusOK, resp.status, "%v", resp.body)
	assert.Equal(t, "refund_pending", resp.body["status"])
	assert.Equal(t, http.StatusOK, e.action(t, id, "refund", ``).status)
	reqs := e.outbox(t, events.SubjectOrderRefundRequested)
	require.Len(t, reqs, 1)
	_, ev, err := events.Decode[events.OrderRefundRequested]([]byte(reqs[0]))
	require.NoError(t, err)
	assert.Equal(t, events.OrderRefundRequested{OrderID: id, Reason: "broken on arrival"}, ev)

	history := resp.body["history"].([]any)
	var statuses []string
	for _, h := range history {
		statuses = append(statuses, h.(map[string]any)["status"].(string))
	}
	assert.Equal(t, []string{"pending", "awaiting_payment", "paid", "shipped", "refund_pending"}, statuses)
}

func TestRequestsNotAllowedInTheStatus(t *testing.T) {
	e := setup(t)
	pending := e.place(t, "k1", validBody).body["order_id"].(string)
	paid := e.place(t, "k2", validBody).body["order_id"].(string)
	e.moveTo(t, paid, locked, sold)
	tests := []struct {
		id, action, status string
	}{
		{pending, "ship", "pending"},
		{pending, "refund", "pending"},
		{paid, "cancel", "paid"},
	}
	for _, tc := range tests {
		t.Run(tc.action+" "+tc.status, func(t *testing.T) {
			before := e.count(t, `SELECT count(*) FROM outbox`)
			resp := e.action(t, tc.id, tc.action, ``)
			assert.Equal(t, http.StatusConflict, resp.status)
			assert.Equal(t, "invalid_transition", resp.code())
			assert.Contains(t, resp.message(), tc.status, "the message names the current status")
			assert.Equal(t, before, e.count(t, `SELECT count(*) FROM outbox`))
		})
	}
}

func TestActionBadInput(t *testing.T) {
	e := setup(t)
	id := e.place(t, "k1", validBody).body["order_id"].(string)
	tests := []struct {
		name, id, action, body string
		status                 int
		code                   string
	}{
		{"unknown order", "nope", "cancel", ``, 404, "order_not_found"},
		{"malformed body", id, "cancel", `{"reason":`, 400, "malformed_json"},
		{"unknown field", id, "refund", `{"why": "x"}`, 400, "malformed_json"},
		{"reason too long", id, "cancel", `{"reason": "` + strings.Repeat("r", order.MaxReasonLen+1) + `"}`, 422, "invalid_reason"},
		{"ship with a reason", id, "ship", `{"reason": "x"}`, 422, "invalid_reason"},
		{"reason with NUL", id, "cancel", `{"reason": "a\u0000b"}`, 422, "invalid_reason"},
		{"body over 1 MiB", id, "cancel", `{"reason": "` + strings.Repeat("r", 1<<20) + `"}`, 413, "body_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.action(t, tc.id, tc.action, tc.body)
			assert.Equal(t, tc.status, resp.status, "%v", resp.body)
			assert.Equal(t, tc.code, resp.code())
		})
	}
	got := e.do(t, http.MethodGet, "/v1/orders/"+id, nil, "")
	assert.Len(t, got.body["history"], 1, "no refused request touched the order")
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM outbox`))
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	e := setup(t)
	assert.Equal(t, http.StatusOK, e.do(t, http.MethodGet, "/healthz", nil, "").status)
	assert.Equal(t, http.StatusOK, e.do(t, http.MethodGet, "/readyz", nil, "").status)
	resp := e.do(t, http.MethodGet, "/v2/nothing", nil, "")
	assert.Equal(t, http.StatusNotFound, resp.status)
	assert.Equal(t, "route_not_found", resp.code())
}

func TestListOrdersOfABuyer(t *testing.T) {
	e := setup(t)
	var ids []string
	for i := range 5 {
		e.now = e.now.Add(time.Second)
		ids = append(ids, e.place(t, fmt.Sprintf("k%d", i), validBody).body["order_id"].(string))
	}
	e.place(t, "other", strings.Replace(validBody, `"u1"`, `"u2"`, 1))

	page := func(query string) ([]string, string) {
		resp := e.do(t, http.MethodGet, "/v1/orders?"+query, nil, "")
		require.Equal(t, http.StatusOK, resp.status, "%v", resp.body)
		var got []string
		for _, o := range resp.body["orders"].([]any) {
			got = append(got, o.(map[string]any)["order_id"].(string))
		}
		next, _ := resp.body["next_before"].(string)
		return got, next
	}
	first, next := page("buyer_id=u1&limit=3")
	assert.Equal(t, []string{ids[4], ids[3], ids[2]}, first, "newest first")
	second, next := page("buyer_id=u1&limit=3&before=" + next)
	assert.Equal(t, []string{ids[1], ids[0]}, second)
	assert.Empty(t, next, "the last page says so")
	all, _ := page("buyer_id=u2")
	assert.Len(t, all, 1)

	for _, q := range []string{"", "buyer_id=u1&limit=0", "buyer_id=u1&limit=101", "buyer_id=u1&limit=x"} {
		resp := e.do(t, http.MethodGet, "/v1/orders?"+q, nil, "")
		assert.Equal(t, http.StatusBadRequest, resp.status, q)
		assert.Equal(t, "invalid_query", resp.code(), q)
	}
}
