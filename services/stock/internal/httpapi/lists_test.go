package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
)

// get answers a GET that must succeed.
func (a *api) get(path string, headers ...string) map[string]any {
	a.t.Helper()
	status, body := a.do("GET", path, ``, headers...)
	require.Equal(a.t, http.StatusOK, status, "GET %s: %v", path, body)
	return body
}

// field returns field of every item of list.
func field(list any, name string) []any {
	out := []any{}
	for _, it := range list.([]any) {
		out = append(out, it.(map[string]any)[name])
	}
	return out
}

func TestListSKUsPagesInSKUOrderWithEachSKUsView(t *testing.T) {
	a := newAPI(t)
	for _, sku := range []string{"MUG-2", "CUP-1", "CUP-3", "CUP-2"} {
		status, _ := a.do("POST", "/v1/skus", `{"sku":"`+sku+`","on_hand":10}`)
		require.Equal(t, http.StatusCreated, status)
	}
	status, _ := a.do("PUT", "/v1/skus/CUP-2/slots", `{"slots":2}`)
	require.Equal(t, http.StatusOK, status)
	status, _ = a.do("POST", "/v1/skus/CUP-2/purchases", `{"qty":5}`, "Idempotency-Key", "p1")
	require.Equal(t, http.StatusCreated, status)

	viewer := []string{"Authorization", a.kit.Bearer("eve", auth.Viewer)}
	body := a.get("/v1/skus?limit=2", viewer...)
	assert.Equal(t, []any{"CUP-1", "CUP-2"}, field(body["skus"], "sku"))
	assert.Equal(t, "CUP-2", body["next_after"])
	assert.Equal(t, a.get("/v1/skus/CUP-2"), body["skus"].([]any)[1], "each SKU as GET /v1/skus/{sku} answers it")

	body = a.get("/v1/skus?limit=2&after=CUP-2")
	assert.Equal(t, []any{"CUP-3", "MUG-2"}, field(body["skus"], "sku"))
	assert.NotContains(t, body, "next_after", "the last page")

	body = a.get("/v1/skus?prefix=CUP-")
	assert.Equal(t, []any{"CUP-1", "CUP-2", "CUP-3"}, field(body["skus"], "sku"))
	assert.Equal(t, []any{float64(1), float64(2), float64(1)}, field(body["skus"], "slots"))
	assert.Equal(t, []any{float64(0), float64(5), float64(0)}, field(body["skus"], "incoming"))
	body = a.get("/v1/skus?prefix=TEA")
	assert.Equal(t, []any{}, body["skus"])

	status, body = a.do("POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":1}`, "Authorization", viewer[1], "Idempotency-Key", "k")
	assert.Equal(t, http.StatusForbidden, status, "a viewer reads, an operator changes")
	assert.Equal(t, "forbidden", errCode(body))
}

func TestListAdjustmentsNewestFirstByStatusAndSKU(t *testing.T) {
	a := newAPI(t)
	for _, sku := range []string{"CUP-1", "MUG-2"} {
		status, _ := a.do("POST", "/v1/skus", `{"sku":"`+sku+`","on_hand":10}`)
		require.Equal(t, http.StatusCreated, status)
	}
	var ids []any // as JSON reads them
	for _, sku := range []string{"CUP-1", "MUG-2", "CUP-1", "CUP-1"} {
		status, body := a.do("POST", "/v1/skus/"+sku+"/adjustments", `{"kind":"manual_adjust","delta":1,"reason":"found"}`, "X-Operator", "alice")
		require.Equal(t, http.StatusCreated, status)
		ids = append(ids, body["id"])
	}
	path := func(i int) string { return "/v1/adjustments/" + jsonNum(ids[i].(float64)) }
	status, _ := a.do("POST", path(0)+"/approve", ``, "X-Operator", "bob")
	require.Equal(t, http.StatusOK, status)
	status, _ = a.do("POST", path(2)+"/reject", ``, "X-Operator", "bob")
	require.Equal(t, http.StatusOK, status)

	body := a.get("/v1/adjustments")
	assert.Equal(t, []any{ids[3], ids[2], ids[1], ids[0]}, field(body["adjustments"], "id"))
	assert.Equal(t, a.get(path(3)), body["adjustments"].([]any)[0], "each as GET /v1/adjustments/{id} answers it")
	assert.NotContains(t, body, "next_before")

	body = a.get("/v1/adjustments?status=pending")
	assert.Equal(t, []any{ids[3], ids[1]}, field(body["adjustments"], "id"))
	body = a.get("/v1/adjustments?status=approved&sku=CUP-1")
	assert.Equal(t, []any{ids[0]}, field(body["adjustments"], "id"))
	assert.Equal(t, []any{"bob"}, field(body["adjustments"], "decided_by"))

	body = a.get("/v1/adjustments?sku=CUP-1&limit=2")
	assert.Equal(t, []any{ids[3], ids[2]}, field(body["adjustments"], "id"))
	body = a.get("/v1/adjustments?sku=CUP-1&limit=2&before=" + jsonNum(body["next_before"].(float64)))
	assert.Equal(t, []any{ids[0]}, field(body["adjustments"], "id"))
	assert.NotContains(t, body, "next_before")
}

func TestLedgerFilters(t *testing.T) {
	a := newAPI(t)
	status, _ := a.do("POST", "/v1/skus", `{"sku":"CUP-1","on_hand":10}`)
	require.Equal(t, http.StatusCreated, status)
	for _, o := range []string{"o1", "o2"} {
		status, _ = a.do("POST", "/v1/internal/locks", `{"order_id":"`+o+`","items":[{"sku":"CUP-1","qty":1}]}`)
		require.Equal(t, http.StatusCreated, status)
	}
	status, _ = a.do("POST", "/v1/internal/orders/o1/sell", ``)
	require.Equal(t, http.StatusOK, status)
	status, _ = a.do("POST", "/v1/skus/CUP-1/purchases", `{"qty":5}`, "X-Operator", "alice", "Idempotency-Key", "p1")
	require.Equal(t, http.StatusCreated, status)
	// ledger: stocktake (ops), lock o1, lock o2, sell o1 (the order service), purchase_expected (alice)

	types := func(q string) []any { return field(a.get("/v1/skus/CUP-1/ledger?" + q)["entries"], "change_type") }
	assert.Equal(t, []any{"stocktake", "lock", "lock", "sell", "purchase_expected"}, types(""))
	assert.Equal(t, []any{"lock", "lock", "sell"}, types("type=lock&type=sell"))
	assert.Equal(t, []any{"lock", "lock", "sell"}, types("type=lock,sell"))
	assert.Equal(t, []any{"lock", "sell"}, types("order_id=o1"))
	assert.Equal(t, []any{"purchase_expected"}, types("operator=alice"))
	assert.Equal(t, []any{}, types("type=purchase_cancelled"))
	assert.Equal(t, []any{"stocktake", "lock", "lock", "sell", "purchase_expected"}, types("type=&order_id=&operator="), "an empty parameter is no filter")

	// Paging keeps to the filter: after= the last row of the page, ascending by id.
	body := a.get("/v1/skus/CUP-1/ledger?type=lock,sell&limit=2")
	assert.Equal(t, []any{"lock", "lock"}, field(body["entries"], "change_type"))
	body = a.get("/v1/skus/CUP-1/ledger?type=lock,sell&limit=2&after=" + jsonNum(body["next_after"].(float64)))
	assert.Equal(t, []any{"sell"}, field(body["entries"], "change_type"))
	assert.NotContains(t, body, "next_after")

	// [since, until): the sell row's time picks it and what follows, and excludes it as until.
	entries := a.get("/v1/skus/CUP-1/ledger")["entries"].([]any)
	at, err := time.Parse(time.RFC3339Nano, entries[3].(map[string]any)["created_at"].(string))
	require.NoError(t, err)
	for _, e := range entries[:3] {
		prev, err := time.Parse(time.RFC3339Nano, e.(map[string]any)["created_at"].(string))
		require.NoError(t, err)
		require.True(t, prev.Before(at), "rows of separate transactions have separate times")
	}
	ts := url.QueryEscape(at.Format(time.RFC3339Nano))
	assert.Equal(t, []any{"sell", "purchase_expected"}, types("since="+ts))
	assert.Equal(t, []any{"stocktake", "lock", "lock"}, types("until="+ts))
	assert.Equal(t, []any{"sell"}, types("since="+ts+"&until="+url.QueryEscape(at.Add(time.Microsecond).Format(time.RFC3339Nano))))
}
