package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newPurchaseOrder places a purchase order of CUP-1 and returns its path.
func (a *api) newPurchaseOrder(body, key string) string {
	a.t.Helper()
	status, po := a.do("POST", "/v1/skus/CUP-1/purchase-orders", body, "X-Operator", "buyer", "Idempotency-Key", key)
	require.Equal(a.t, http.StatusCreated, status, "%v", po)
	return "/v1/purchase-orders/" + jsonNum(po["id"].(float64))
}

func TestPurchaseOrderReceivedInPartsOverHTTP(t *testing.T) {
	a := newAPI(t)
	status, _ := a.do("POST", "/v1/skus", `{"sku":"CUP-1","on_hand":5}`)
	require.Equal(t, http.StatusCreated, status)

	status, po := a.do("POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":100,"remark":"supplier A"}`, "X-Operator", "buyer", "Idempotency-Key", "po-1")
	require.Equal(t, http.StatusCreated, status)
	path := "/v1/purchase-orders/" + jsonNum(po["id"].(float64))
	assert.Equal(t, map[string]any{"id": po["id"], "sku": "CUP-1", "expected": float64(100), "received": float64(0), "status": "open",
		"remark": "supplier A", "created_by": "buyer", "created_at": po["created_at"], "receipts": []any{}}, po)
	assert.Equal(t, float64(100), a.get("/v1/skus/CUP-1")["incoming"])

	before := a.written()
	status, again := a.do("POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":100,"remark":"supplier A"}`, "X-Operator", "buyer", "Idempotency-Key", "po-1")
	assert.Equal(t, http.StatusOK, status, "a replay")
	assert.Equal(t, po, again)
	assert.Equal(t, before, a.written(), "a replay changes nothing")
	assert.Equal(t, po, a.get(path))

	receive := func(body, key string) (int, map[string]any) {
		return a.do("POST", path+"/receipts", body, "X-Operator", "dock-"+key, "Idempotency-Key", key)
	}
	status, po = receive(`{"quantity":30,"remark":"pallet 1"}`, "r1")
	require.Equal(t, http.StatusCreated, status)
	assert.Equal(t, "partially_received", po["status"])
	receipt := po["receipts"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"ledger_id": receipt["ledger_id"], "quantity": float64(30), "operator": "dock-r1", "remark": "pallet 1",
		"at": receipt["at"]}, receipt)

	before = a.written()
	status, again = receive(`{"quantity":30,"remark":"pallet 1"}`, "r1")
	assert.Equal(t, http.StatusOK, status, "a replayed receipt")
	assert.Equal(t, po, again)
	assert.Equal(t, before, a.written(), "a replayed receipt changes nothing")

	status, po = receive(`{"quantity":50}`, "r2")
	require.Equal(t, http.StatusCreated, status)
	assert.Equal(t, "partially_received", po["status"])
	assert.Equal(t, float64(80), po["received"])
	status, po = receive(`{"quantity":20}`, "r3")
	require.Equal(t, http.StatusCreated, status)
	assert.Equal(t, "received", po["status"])
	assert.Equal(t, []any{float64(30), float64(50), float64(20)}, field(po["receipts"], "quantity"))
	assert.Equal(t, []any{"dock-r1", "dock-r2", "dock-r3"}, field(po["receipts"], "operator"))

	sku := a.get("/v1/skus/CUP-1")
	assert.Equal(t, []any{float64(105), float64(0)}, []any{sku["on_hand"], sku["incoming"]})

	// The ledger says which order each row is of; the receipt's ledger_id is its row.
	entries := a.get("/v1/skus/CUP-1/ledger?type=purchase_expected,purchase_inbound")["entries"].([]any)
	id := jsonNum(po["id"].(float64))
	assert.Equal(t, []any{"purchase order " + id + ": supplier A", "purchase order " + id + ": pallet 1", "purchase order " + id, "purchase order " + id},
		field(entries, "remark"))
	assert.Equal(t, receipt["ledger_id"], entries[1].(map[string]any)["id"])
	assert.Equal(t, true, a.verify())
}

func TestPurchaseOrderClosedWithARemainder(t *testing.T) {
	a := newAPI(t)
	status, _ := a.do("POST", "/v1/skus", `{"sku":"CUP-1","on_hand":0}`)
	require.Equal(t, http.StatusCreated, status)
	first := a.newPurchaseOrder(`{"quantity":100}`, "po-1")
	second := a.newPurchaseOrder(`{"quantity":10}`, "po-2")
	status, _ = a.do("POST", first+"/receipts", `{"quantity":30}`, "Idempotency-Key", "r1")
	require.Equal(t, http.StatusCreated, status)

	status, po := a.do("POST", first+"/close", ``, "X-Operator", "carol")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "closed", po["status"])
	assert.Equal(t, "carol", po["closed_by"])
	assert.NotEmpty(t, po["closed_at"])
	assert.Equal(t, float64(30), po["received"])
	sku := a.get("/v1/skus/CUP-1")
	assert.Equal(t, []any{float64(30), float64(10)}, []any{sku["on_hand"], sku["incoming"]}, "the 70 that never arrived left incoming")

	before := a.written()
	status, again := a.do("POST", first+"/close", ``, "X-Operator", "dave", "Idempotency-Key", "c2")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, po, again, "closing again answers the closed order")
	assert.Equal(t, before, a.written())

	entries := a.get("/v1/skus/CUP-1/ledger?type=purchase_cancelled")["entries"].([]any)
	require.Len(t, entries, 1)
	e := entries[0].(map[string]any)
	assert.Equal(t, []any{float64(70), "carol", float64(10)}, []any{e["qty"], e["operator"], e["after"].(map[string]any)["incoming"]})

	// Newest first, paged by before=.
	body := a.get("/v1/skus/CUP-1/purchase-orders?limit=1")
	assert.Equal(t, []any{a.get(second)}, body["purchase_orders"])
	body = a.get("/v1/skus/CUP-1/purchase-orders?limit=1&before=" + jsonNum(body["next_before"].(float64)))
	assert.Equal(t, []any{po}, body["purchase_orders"])
	assert.NotContains(t, body, "next_before")
	assert.Equal(t, true, a.verify())
}

// Bad input: a status, a stable code and a message, and nothing written.
func TestPurchaseOrderBadInputChangesNothing(t *testing.T) {
	a := newAPI(t)
	status, _ := a.do("POST", "/v1/skus", `{"sku":"CUP-1","on_hand":0}`)
	require.Equal(t, http.StatusCreated, status)
	open := a.newPurchaseOrder(`{"quantity":100}`, "po-1")
	done := a.newPurchaseOrder(`{"quantity":5}`, "po-2")
	status, _ = a.do("POST", done+"/receipts", `{"quantity":5}`, "Idempotency-Key", "r1")
	require.Equal(t, http.StatusCreated, status)
	status, _ = a.do("POST", open+"/receipts", `{"quantity":80}`, "Idempotency-Key", "r1")
	require.Equal(t, http.StatusCreated, status)

	key := []string{"Idempotency-Key", "k-new"}
	a.requireRefused([]refusal{
		{"place without key", "POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":5}`, nil, 400, "missing_idempotency_key"},
		{"place with a key over 200 bytes", "POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":5}`, []string{"Idempotency-Key", strings.Repeat("k", 201)}, 400, "invalid_idempotency_key"},
		{"place malformed", "POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":`, key, 400, "malformed_json"},
		{"place with qty, the old field", "POST", "/v1/skus/CUP-1/purchase-orders", `{"qty":5}`, key, 400, "malformed_json"},
		{"place zero", "POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":0}`, key, 422, "invalid_quantity"},
		{"place too many", "POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":1000000001}`, key, 422, "invalid_quantity"},
		{"place remark with NUL", "POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":5,"remark":"a\u0000b"}`, key, 422, "invalid_remark"},
		{"place remark too long", "POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":5,"remark":"` + strings.Repeat("r", 501) + `"}`, key, 422, "invalid_remark"},
		{"place bad sku", "POST", "/v1/skus/a%20b/purchase-orders", `{"quantity":5}`, key, 422, "invalid_sku"},
		{"place unknown sku", "POST", "/v1/skus/NOPE/purchase-orders", `{"quantity":5}`, key, 404, "sku_not_found"},
		{"place key reused for another quantity", "POST", "/v1/skus/CUP-1/purchase-orders", `{"quantity":99}`, []string{"Idempotency-Key", "po-1"}, 409, "idempotency_conflict"},
		{"get unknown", "GET", "/v1/purchase-orders/999", ``, nil, 404, "purchase_order_not_found"},
		{"get bad id", "GET", "/v1/purchase-orders/x", ``, nil, 404, "purchase_order_not_found"},
		{"list unknown sku", "GET", "/v1/skus/NOPE/purchase-orders", ``, nil, 404, "sku_not_found"},
		{"list bad cursor", "GET", "/v1/skus/CUP-1/purchase-orders?before=x", ``, nil, 400, "invalid_cursor"},
		{"list bad limit", "GET", "/v1/skus/CUP-1/purchase-orders?limit=0", ``, nil, 400, "invalid_limit"},
		{"receive without key", "POST", open + "/receipts", `{"quantity":5}`, nil, 400, "missing_idempotency_key"},
		{"receive zero", "POST", open + "/receipts", `{"quantity":0}`, key, 422, "invalid_quantity"},
		{"receive remark with NUL", "POST", open + "/receipts", `{"quantity":5,"remark":"a\u0000b"}`, key, 422, "invalid_remark"},
		{"receive more than expected", "POST", open + "/receipts", `{"quantity":21}`, key, 409, "over_receipt"},
		{"receive on a received order", "POST", done + "/receipts", `{"quantity":1}`, key, 409, "purchase_order_not_open"},
		{"receive key reused for another quantity", "POST", open + "/receipts", `{"quantity":7}`, []string{"Idempotency-Key", "r1"}, 409, "idempotency_conflict"},
		{"receive unknown order", "POST", "/v1/purchase-orders/999/receipts", `{"quantity":1}`, key, 404, "purchase_order_not_found"},
		{"close a received order", "POST", done + "/close", ``, nil, 409, "purchase_order_not_open"},
		{"close unknown order", "POST", "/v1/purchase-orders/999/close", ``, nil, 404, "purchase_order_not_found"},
	})
	assert.Equal(t, true, a.verify())
}

// verify answers POST /v1/admin/verify's consistent: the ledger's fold is the summaries.
func (a *api) verify() any {
	a.t.Helper()
	status, body := a.do("POST", "/v1/admin/verify", ``)
	require.Equal(a.t, http.StatusOK, status)
	return body["consistent"]
}
