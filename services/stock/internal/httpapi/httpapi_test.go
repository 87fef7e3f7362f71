package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
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
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/httpapi"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
)

type api struct {
	t    *testing.T
	srv  *httptest.Server
	pool *pgxpool.Pool
	kit  *authtest.Kit
}

func newAPI(t *testing.T) *api {
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	svc := app.New(postgres.NewStore(pool))
	kit := authtest.New(t, "order")
	srv := httptest.NewServer(httpapi.Handler(svc, slog.New(slog.DiscardHandler), func(context.Context) error { return nil }, kit.Verifier))
	t.Cleanup(srv.Close)
	return &api{t: t, srv: srv, pool: pool, kit: kit}
}

// do sends a request with a token fit for the path: a service token for /v1/internal/, else a
// staff token (operator, viewer, admin) of subject "ops" — or, when the headers name an
// "X-Operator", an operator and approver token of that subject. An explicit Authorization
// header wins.
func (a *api) do(method, path, body string, headers ...string) (int, map[string]any) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	require.NoError(a.t, err)
	switch {
	case strings.HasPrefix(path, "/v1/internal/"):
		tok, err := a.kit.Service("order").Mint("order", []auth.Role{auth.Service}, "", time.Minute)
		require.NoError(a.t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
	default:
		req.Header.Set("Authorization", a.kit.Bearer("ops", auth.Operator, auth.Viewer, auth.Admin))
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "X-Operator" {
			req.Header.Set("Authorization", a.kit.Bearer(headers[i+1], auth.Operator, auth.Approver))
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	var out map[string]any
	if len(raw) > 0 {
		require.NoError(a.t, json.Unmarshal(raw, &out), "body %s", raw)
	}
	return resp.StatusCode, out
}

// written counts every row a request could have written.
func (a *api) written() int64 {
	var n int64
	err := a.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM sku_stock) + (SELECT count(*) FROM stock_ledger)
		+ (SELECT count(*) FROM order_lock) + (SELECT count(*) FROM stock_lock) + (SELECT count(*) FROM adjustment)
		+ (SELECT coalesce(sum(on_hand + locked + sold + incoming), 0) FROM sku_stock)
		+ (SELECT coalesce(sum(1 + received + (closed_at IS NOT NULL)::int), 0) FROM purchase_order)
		+ (SELECT count(*) FROM purchase_order_receipt)`).Scan(&n)
	require.NoError(a.t, err)
	return n
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	a := newAPI(t)
	status, _ := a.do("POST", "/v1/skus", `{"sku":"CUP-1","on_hand":300}`)
	require.Equal(t, http.StatusCreated, status)
	status, _ = a.do("POST", "/v1/internal/locks", `{"order_id":"o-held","items":[{"sku":"CUP-1","qty":1}]}`)
	require.Equal(t, http.StatusCreated, status)

	key := []string{"Idempotency-Key", "k1"}
	a.requireRefused([]refusal{
		{"malformed json", "POST", "/v1/skus", `{"sku":`, nil, 400, "malformed_json"},
		{"unknown field", "POST", "/v1/skus", `{"sku":"X","on_hand":1,"stock":5}`, nil, 400, "malformed_json"},
		{"trailing data", "POST", "/v1/skus", `{"sku":"X","on_hand":1} {}`, nil, 400, "malformed_json"},
		{"overflowing number", "POST", "/v1/skus", `{"sku":"X","on_hand":99999999999999999999}`, nil, 400, "malformed_json"},
		{"body over 1 MiB", "POST", "/v1/skus", `{"sku":"X","on_hand":1,"x":"` + strings.Repeat("a", 1<<20) + `"}`, nil, 413, "body_too_large"},
		{"negative on_hand", "POST", "/v1/skus", `{"sku":"X","on_hand":-1}`, nil, 422, "invalid_quantity"},
		{"huge on_hand", "POST", "/v1/skus", `{"sku":"X","on_hand":1000000001}`, nil, 422, "invalid_quantity"},
		{"bad sku", "POST", "/v1/skus", `{"sku":"has space","on_hand":1}`, nil, 422, "invalid_sku"},
		{"empty sku", "POST", "/v1/skus", `{"on_hand":1}`, nil, 422, "invalid_sku"},
		{"duplicate sku", "POST", "/v1/skus", `{"sku":"CUP-1","on_hand":5}`, nil, 409, "sku_exists"},
		{"unknown sku", "GET", "/v1/skus/NOPE", ``, nil, 404, "sku_not_found"},
		{"ledger of unknown sku", "GET", "/v1/skus/NOPE/ledger", ``, nil, 404, "sku_not_found"},
		{"bad ledger cursor", "GET", "/v1/skus/CUP-1/ledger?after=x", ``, nil, 400, "invalid_cursor"},
		{"bad ledger limit", "GET", "/v1/skus/CUP-1/ledger?limit=0", ``, nil, 400, "invalid_limit"},
		{"purchase without key", "POST", "/v1/skus/CUP-1/purchases", `{"qty":5}`, nil, 400, "missing_idempotency_key"},
		{"purchase with a key over 200 bytes", "POST", "/v1/skus/CUP-1/purchases", `{"qty":5}`, []string{"Idempotency-Key", strings.Repeat("k", 201)}, 400, "invalid_idempotency_key"},
		{"purchase zero", "POST", "/v1/skus/CUP-1/purchases", `{"qty":0}`, key, 422, "invalid_quantity"},
		{"purchase negative", "POST", "/v1/skus/CUP-1/purchases", `{"qty":-3}`, key, 422, "invalid_quantity"},
		{"purchase unknown sku", "POST", "/v1/skus/NOPE/purchases", `{"qty":3}`, key, 404, "sku_not_found"},
		{"receive more than incoming", "POST", "/v1/skus/CUP-1/receipts", `{"qty":3}`, key, 409, "insufficient_stock"},
		{"lock zero", "POST", "/v1/internal/locks", `{"order_id":"o1","items":[{"sku":"CUP-1","qty":0}]}`, nil, 422, "invalid_quantity"},
		{"lock negative", "POST", "/v1/internal/locks", `{"order_id":"o1","items":[{"sku":"CUP-1","qty":-1}]}`, nil, 422, "invalid_quantity"},
		{"lock no items", "POST", "/v1/internal/locks", `{"order_id":"o1","items":[]}`, nil, 422, "invalid_order"},
		{"lock no order id", "POST", "/v1/internal/locks", `{"items":[{"sku":"CUP-1","qty":1}]}`, nil, 422, "invalid_order_id"},
		{"lock bad timeout", "POST", "/v1/internal/locks", `{"order_id":"o1","items":[{"sku":"CUP-1","qty":1}],"payment_timeout":"soon"}`, nil, 422, "invalid_payment_timeout"},
		{"lock over merged max", "POST", "/v1/internal/locks", `{"order_id":"o1","items":[{"sku":"CUP-1","qty":1000000000},{"sku":"CUP-1","qty":1}]}`, nil, 422, "invalid_quantity"},
		{"release bad reason", "POST", "/v1/internal/orders/o-held/release", `{"reason":"bored"}`, nil, 422, "invalid_reason"},
		{"sell unknown order", "POST", "/v1/internal/orders/nope/sell", ``, nil, 404, "lock_not_found"},
		{"ship unpaid order", "POST", "/v1/internal/orders/o-held/ship", ``, nil, 409, "lock_not_held"},
		{"adjust zero", "POST", "/v1/skus/CUP-1/adjustments", `{"kind":"manual_adjust","delta":0,"reason":"x"}`, []string{"X-Operator", "al"}, 422, "invalid_adjustment"},
		{"adjust bad kind", "POST", "/v1/skus/CUP-1/adjustments", `{"kind":"magic","delta":1,"reason":"x"}`, []string{"X-Operator", "al"}, 422, "invalid_adjustment"},
		{"adjust no reason", "POST", "/v1/skus/CUP-1/adjustments", `{"kind":"manual_adjust","delta":1}`, []string{"X-Operator", "al"}, 422, "invalid_adjustment"},
		{"adjust reason with NUL", "POST", "/v1/skus/CUP-1/adjustments", `{"kind":"manual_adjust","delta":1,"reason":"a\u0000b"}`, []string{"X-Operator", "al"}, 422, "invalid_adjustment"},
		{"purchase remark with NUL", "POST", "/v1/skus/CUP-1/purchases", `{"qty":5,"remark":"a\u0000b"}`, key, 422, "invalid_remark"},
		{"lock order id with NUL", "POST", "/v1/internal/locks", `{"order_id":"a\u0000b","items":[{"sku":"CUP-1","qty":1}]}`, nil, 422, "invalid_order_id"},
		{"order path with NUL", "POST", "/v1/internal/orders/a%00b/ship", ``, nil, 422, "invalid_order_id"},
		{"sell payment id with NUL", "POST", "/v1/internal/orders/o-held/sell", `{"payment_id":"a\u0000b"}`, nil, 422, "invalid_payment_id"},
		{"approve unknown adjustment", "POST", "/v1/adjustments/999/approve", ``, []string{"X-Operator", "bo"}, 404, "adjustment_not_found"},
		{"list skus bad prefix", "GET", "/v1/skus?prefix=a%20b", ``, nil, 400, "invalid_prefix"},
		{"list skus bad cursor", "GET", "/v1/skus?after=-x", ``, nil, 400, "invalid_cursor"},
		{"list skus limit 0", "GET", "/v1/skus?limit=0", ``, nil, 400, "invalid_limit"},
		{"list skus limit 1001", "GET", "/v1/skus?limit=1001", ``, nil, 400, "invalid_limit"},
		{"list adjustments bad status", "GET", "/v1/adjustments?status=done", ``, nil, 400, "invalid_status"},
		{"list adjustments bad sku", "GET", "/v1/adjustments?sku=a%20b", ``, nil, 400, "invalid_sku_query"},
		{"list adjustments bad cursor", "GET", "/v1/adjustments?before=-1", ``, nil, 400, "invalid_cursor"},
		{"list adjustments bad limit", "GET", "/v1/adjustments?limit=x", ``, nil, 400, "invalid_limit"},
		{"ledger unknown type", "GET", "/v1/skus/CUP-1/ledger?type=lock,teleport", ``, nil, 400, "invalid_change_type"},
		{"ledger bad since", "GET", "/v1/skus/CUP-1/ledger?since=yesterday", ``, nil, 400, "invalid_time"},
		{"ledger bad until", "GET", "/v1/skus/CUP-1/ledger?until=2026-01-02", ``, nil, 400, "invalid_time"},
		{"ledger until before since", "GET", "/v1/skus/CUP-1/ledger?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", ``, nil, 400, "invalid_time"},
		{"ledger operator with NUL", "GET", "/v1/skus/CUP-1/ledger?operator=a%00b", ``, nil, 400, "invalid_query"},
		{"unknown route", "GET", "/v1/nothing", ``, nil, 404, "route_not_found"},
	})
}

// refusal is a request that must be refused with status and code.
type refusal struct {
	name, method, path, body string
	headers                  []string
	status                   int
	code                     string
}

// requireRefused sends each request: each is answered with its status, its stable code and a
// message, and writes nothing.
func (a *api) requireRefused(cases []refusal) {
	for _, c := range cases {
		a.t.Run(c.name, func(t *testing.T) {
			before := a.written()
			status, body := a.do(c.method, c.path, c.body, c.headers...)
			assert.Equal(t, c.status, status)
			assert.Equal(t, c.code, errCode(body))
			assert.NotEmpty(t, body["error"].(map[string]any)["message"])
			assert.Equal(t, before, a.written(), "a refused request writes nothing")
		})
	}
}

func TestInsufficientLockIsAConflictAndWritesOnlyTheRejection(t *testing.T) {
	a := newAPI(t)
	status, _ := a.do("POST", "/v1/skus", `{"sku":"CUP-1","on_hand":1}`)
	require.Equal(t, http.StatusCreated, status)
	status, body := a.do("POST", "/v1/internal/locks", `{"order_id":"o1","items":[{"sku":"CUP-1","qty":2}]}`)
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, "insufficient_stock", errCode(body))
	status, body = a.do("GET", "/v1/skus/CUP-1", ``)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, float64(1), body["available"])
	assert.Equal(t, float64(0), body["locked"])
}

func TestHappyPathOverHTTP(t *testing.T) {
	a := newAPI(t)
	status, body := a.do("POST", "/v1/skus", `{"sku":"CUP-1","on_hand":300}`)
	require.Equal(t, http.StatusCreated, status)
	assert.Equal(t, map[string]any{"sku": "CUP-1", "on_hand": float64(300), "available": float64(300), "locked": float64(0),
		"sold": float64(0), "incoming": float64(0), "slots": float64(1), "updated_at": body["updated_at"]}, body)

	status, _ = a.do("POST", "/v1/skus/CUP-1/purchases", `{"qty":50,"remark":"PO-1"}`, "Idempotency-Key", "po-1")
	require.Equal(t, http.StatusCreated, status)
	status, _ = a.do("POST", "/v1/skus/CUP-1/purchases", `{"qty":50,"remark":"PO-1"}`, "Idempotency-Key", "po-1")
	require.Equal(t, http.StatusOK, status, "a replay returns the first entry")
	status, _ = a.do("POST", "/v1/skus/CUP-1/receipts", `{"qty":50}`, "Idempotency-Key", "po-1")
	require.Equal(t, http.StatusCreated, status)

	status, body = a.do("POST", "/v1/internal/locks", `{"order_id":"o1","items":[{"sku":"CUP-1","qty":2}],"payment_timeout":"10m"}`)
	require.Equal(t, http.StatusCreated, status)
	assert.Equal(t, "locked", body["status"])
	status, body = a.do("POST", "/v1/internal/locks", `{"order_id":"o1","items":[{"sku":"CUP-1","qty":2}]}`)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, true, body["duplicate"])

	status, body = a.do("POST", "/v1/internal/orders/o1/sell", ``)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, true, body["applied"])
	status, body = a.do("POST", "/v1/internal/orders/o1/release", `{"reason":"timeout"}`)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, false, body["applied"], "release after sell is a reported no-op")
	assert.Equal(t, "locks already sold", body["noop"])
	status, body = a.do("GET", "/v1/internal/orders/o1", ``)
	require.Equal(t, http.StatusOK, status)
	assert.NotContains(t, body, "released_by", "sold, never released")

	// What released an order's locks, for the order service's stuck-order repair: the first
	// to reach them, whatever was asked.
	status, _ = a.do("POST", "/v1/internal/locks", `{"order_id":"o2","items":[{"sku":"CUP-1","qty":1}],"payment_timeout":"10m"}`)
	require.Equal(t, http.StatusCreated, status)
	status, _ = a.do("POST", "/v1/internal/orders/o2/release", `{"reason":"cancel"}`)
	require.Equal(t, http.StatusOK, status)
	status, body = a.do("GET", "/v1/internal/orders/o2", ``)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "cancel", body["released_by"])

	status, body = a.do("POST", "/v1/skus/CUP-1/adjustments", `{"kind":"stocktake","counted":340,"reason":"count"}`, "X-Operator", "alice")
	require.Equal(t, http.StatusCreated, status)
	id := body["id"].(float64)
	status, body = a.do("POST", "/v1/adjustments/"+jsonNum(id)+"/approve", ``, "X-Operator", "alice")
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, "self_approval", errCode(body))
	status, _ = a.do("POST", "/v1/adjustments/"+jsonNum(id)+"/approve", ``, "X-Operator", "bob")
	require.Equal(t, http.StatusOK, status)

	status, body = a.do("GET", "/v1/skus/CUP-1", ``)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, float64(340), body["on_hand"])
	assert.Equal(t, float64(2), body["sold"])
	assert.Equal(t, float64(338), body["available"])

	status, body = a.do("GET", "/v1/skus/CUP-1/ledger?limit=3", ``)
	require.Equal(t, http.StatusOK, status)
	entries := body["entries"].([]any)
	require.Len(t, entries, 3)
	types := []string{}
	for _, e := range entries {
		types = append(types, e.(map[string]any)["change_type"].(string))
	}
	assert.Equal(t, []string{"stocktake", "purchase_expected", "purchase_inbound"}, types)
	status, body = a.do("GET", "/v1/skus/CUP-1/ledger?after="+jsonNum(body["next_after"].(float64)), ``)
	require.Equal(t, http.StatusOK, status)
	types = nil
	for _, e := range body["entries"].([]any) {
		types = append(types, e.(map[string]any)["change_type"].(string))
	}
	assert.Equal(t, []string{"lock", "sell", "lock", "release_cancel", "stocktake"}, types)

	status, body = a.do("POST", "/v1/admin/verify", ``)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, true, body["consistent"])
}

func jsonNum(f float64) string { b, _ := json.Marshal(int64(f)); return string(b) }

func TestStocktakeThatNoLongerFitsIsAConflict(t *testing.T) {
	a := newAPI(t)
	status, _ := a.do("POST", "/v1/skus", `{"sku":"CUP-1","on_hand":10}`)
	require.Equal(t, http.StatusCreated, status)
	status, body := a.do("POST", "/v1/skus/CUP-1/adjustments", `{"kind":"stocktake","counted":2,"reason":"count"}`, "X-Operator", "alice")
	require.Equal(t, http.StatusCreated, status)
	id := jsonNum(body["id"].(float64))
	status, _ = a.do("POST", "/v1/internal/locks", `{"order_id":"o1","items":[{"sku":"CUP-1","qty":5}]}`)
	require.Equal(t, http.StatusCreated, status)
	before := a.written()
	status, body = a.do("POST", "/v1/adjustments/"+id+"/approve", ``, "X-Operator", "bob")
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, "stocktake_conflict", errCode(body))
	assert.Equal(t, before, a.written(), "a refused approval writes nothing")
}
