package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
)

// endpoint is one route of one service, with a token that may call it and one whose role may
// not.
type endpoint struct {
	svc, method, path string
	body              any
	denied            []auth.Role // a role that must get 403
}

// TestEveryEndpointRefusesWhoMayNotCallIt walks every route of the four processes with no
// token, a forged token (another key), an expired token and a token of a role the route does
// not admit, and checks each answer is 401 or 403 with the error body, and that nothing the
// routes could change has changed: the SKU and its ledger, the order and its history, its
// locks, payments and deadline, the adjustment.
func TestEveryEndpointRefusesWhoMayNotCallIt(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 50)
	buyer := "u-" + randomHex(3)
	id := orderAs(t, c, buyer, "10m", item{SKU: sku, Qty: 2, UnitPrice: 4900})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	status, adj := c.call("POST", sys.URLs["stock"]+"/v1/skus/"+sku+"/adjustments",
		map[string]any{"kind": "manual_adjust", "delta": 5, "reason": "found a box"},
		map[string]string{"Authorization": "Bearer " + token(t, "olga", auth.Operator)})
	require.Equal(t, http.StatusCreated, status, "%v", adj)
	adjID := fmt.Sprint(int64(adj["id"].(float64)))

	var (
		buyers   = []auth.Role{auth.Buyer}
		viewer   = []auth.Role{auth.Viewer}
		operator = []auth.Role{auth.Operator}
	)
	key := "auth-" + randomHex(4)
	routes := []endpoint{
		{"order", "POST", "/v1/orders", map[string]any{"buyer_id": buyer, "items": []item{{SKU: sku, Qty: 1, UnitPrice: 4900}}, "currency": "CNY"}, viewer},
		{"order", "GET", "/v1/orders/" + id, nil, nil},
		{"order", "GET", "/v1/orders?buyer_id=" + buyer, nil, nil},
		{"order", "POST", "/v1/orders/" + id + "/cancel", nil, viewer},
		{"order", "POST", "/v1/orders/" + id + "/refund", nil, buyers},
		{"order", "POST", "/v1/orders/" + id + "/ship", nil, buyers},
		{"order", "PUT", "/v1/prices/" + sku, map[string]any{"unit_price": 1, "currency": "CNY"}, []auth.Role{auth.Buyer, auth.Viewer}},
		{"order", "GET", "/v1/prices/" + sku, nil, nil},
		{"stock", "POST", "/v1/skus", map[string]any{"sku": sku + "-B", "on_hand": 1000000}, buyers},
		{"stock", "GET", "/v1/skus/" + sku, nil, buyers},
		{"stock", "GET", "/v1/skus/" + sku + "/ledger", nil, buyers},
		{"stock", "POST", "/v1/skus/" + sku + "/purchases", map[string]any{"qty": 1000000}, viewer},
		{"stock", "POST", "/v1/skus/" + sku + "/receipts", map[string]any{"qty": 1000000}, viewer},
		{"stock", "PUT", "/v1/skus/" + sku + "/slots", map[string]any{"slots": 4}, viewer},
		{"stock", "POST", "/v1/skus/" + sku + "/rebalance", map[string]any{}, viewer},
		{"stock", "POST", "/v1/skus/" + sku + "/adjustments", map[string]any{"kind": "manual_adjust", "delta": 1000, "reason": "x"}, viewer},
		{"stock", "GET", "/v1/adjustments/" + adjID, nil, buyers},
		{"stock", "POST", "/v1/adjustments/" + adjID + "/approve", nil, operator},
		{"stock", "POST", "/v1/adjustments/" + adjID + "/reject", nil, operator},
		{"stock", "POST", "/v1/internal/locks", map[string]any{"order_id": "o-" + randomHex(4), "items": []map[string]any{{"sku": sku, "qty": 48}}}, []auth.Role{auth.Admin}},
		{"stock", "GET", "/v1/internal/orders/" + id + "/locks", nil, []auth.Role{auth.Admin}},
		{"stock", "GET", "/v1/internal/orders/" + id, nil, []auth.Role{auth.Admin}},
		{"stock", "POST", "/v1/internal/orders/" + id + "/sell", nil, []auth.Role{auth.Admin}},
		{"stock", "POST", "/v1/internal/orders/" + id + "/ship", nil, []auth.Role{auth.Admin}},
		{"stock", "POST", "/v1/internal/orders/" + id + "/refund", nil, []auth.Role{auth.Admin}},
		{"stock", "POST", "/v1/internal/orders/" + id + "/release", map[string]any{"reason": "cancel"}, []auth.Role{auth.Admin}},
		{"stock", "POST", "/v1/admin/verify", nil, viewer},
		{"stock", "POST", "/v1/admin/rebuild", nil, operator},
		{"stock", "GET", "/v1/admin/overdue-locks", nil, buyers},
		{"payment-adapter", "GET", "/v1/payments?order_id=" + id, nil, buyers},
		{"payment-adapter", "GET", "/v1/payments/p-" + randomHex(4), nil, buyers},
		{"timeout", "GET", "/v1/deadlines/" + id, nil, buyers},
		{"timeout", "POST", "/v1/admin/sweep", nil, viewer},
	}
	for _, svc := range []string{"order", "stock", "payment-adapter", "timeout"} {
		routes = append(routes,
			endpoint{svc, "POST", "/v1/admin/reconcile/outbox?mode=check", nil, viewer},
			endpoint{svc, "POST", "/v1/admin/reconcile/outbox?mode=repair", nil, operator},
			endpoint{svc, "GET", "/v1/admin/reconcile/runs", nil, buyers})
	}

	signer, err := sys.Signer()
	require.NoError(t, err)
	expired, err := signer.MintAt("olga", []auth.Role{auth.Admin}, "", time.Now().Add(-time.Hour), 10*time.Minute)
	require.NoError(t, err)
	forged := forgedToken(t)
	before := snapshot(t, c, sku, id, adjID)
	for _, r := range routes {
		u := sys.URLs[r.svc] + r.path
		try := func(name, bearer string, want int) {
			h := map[string]string{"Idempotency-Key": key, "Authorization": bearer}
			status, body := c.call(r.method, u, r.body, h)
			assert.Equal(t, want, status, "%s %s %s (%s): %v", name, r.method, r.svc, r.path, body)
			assert.Contains(t, body, "error", "%s %s %s: the error body", name, r.method, r.path)
		}
		try("no token", "", http.StatusUnauthorized)
		try("forged token", "Bearer "+forged, http.StatusUnauthorized)
		try("expired token", "Bearer "+expired, http.StatusUnauthorized)
		try("not a bearer", "Basic b2xnYTpvbGdh", http.StatusUnauthorized)
		for _, role := range r.denied {
			subject := "someone-" + string(role)
			if role == auth.Buyer {
				subject = buyer // even the order's own buyer
			}
			try("role "+string(role), "Bearer "+token(t, subject, role), http.StatusForbidden)
		}
	}
	assert.Equal(t, before, snapshot(t, c, sku, id, adjID), "a refused request changes nothing")

	// Another buyer may neither read nor cancel the order; the requester may not approve their
	// own adjustment; and all of that changes nothing either.
	other := "Bearer " + token(t, "u-other", auth.Buyer)
	for _, p := range []struct{ method, path string }{{"GET", "/v1/orders/" + id}, {"POST", "/v1/orders/" + id + "/cancel"}, {"GET", "/v1/orders?buyer_id=" + buyer}} {
		status, body := c.call(p.method, sys.URLs["order"]+p.path, nil, map[string]string{"Authorization": other})
		assert.Equal(t, http.StatusForbidden, status, "another buyer %s %s: %v", p.method, p.path, body)
	}
	status, body := c.call("POST", sys.URLs["stock"]+"/v1/adjustments/"+adjID+"/approve", nil,
		map[string]string{"Authorization": "Bearer " + token(t, "olga", auth.Operator, auth.Approver)})
	assert.Equal(t, http.StatusForbidden, status, "%v", body)
	assert.Equal(t, "self_approval", errorCode(body))
	assert.Equal(t, before, snapshot(t, c, sku, id, adjID), "a refused request changes nothing")

	// Whom the token names is who the ledger says acted.
	status, body = c.call("POST", sys.URLs["stock"]+"/v1/adjustments/"+adjID+"/approve", nil,
		map[string]string{"Authorization": "Bearer " + token(t, "bob", auth.Approver)})
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Equal(t, "olga", body["requested_by"])
	assert.Equal(t, "bob", body["decided_by"])
	rows := ledger(t, c, sku)
	last := rows[len(rows)-1].(map[string]any)
	assert.Equal(t, "manual_adjust", last["change_type"])
	assert.Equal(t, "bob", last["operator"])
}

// TestSellingWithoutPaymentIsRefused is the review's free-goods path: a buyer (or anyone
// without the service role) cannot mark an order sold through stock's internal API.
func TestSellingWithoutPaymentIsRefused(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 5)
	buyer := "u-" + randomHex(3)
	id := orderAs(t, c, buyer, "10m", item{SKU: sku, Qty: 1, UnitPrice: 4900})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	for _, who := range []string{"Bearer " + token(t, buyer, auth.Buyer), "Bearer " + token(t, "ops", auth.Operator, auth.Admin), ""} {
		status, body := c.call("POST", sys.URLs["stock"]+"/v1/internal/orders/"+id+"/sell", nil, map[string]string{"Authorization": who})
		assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status, "%v", body)
	}
	time.Sleep(500 * time.Millisecond) // a sell would have become stock.sold → paid by now
	assert.Equal(t, "awaiting_payment", c.getOrder(id)["status"])
	assert.Equal(t, float64(0), c.sku(sku)["sold"])
}

// orderAs places an order as buyer, with that buyer's own token.
func orderAs(t *testing.T, c client, buyer, timeout string, items ...item) string {
	body := map[string]any{"buyer_id": buyer, "items": items, "currency": "CNY", "payment_timeout": timeout}
	status, resp := c.call("POST", sys.URLs["order"]+"/v1/orders", body,
		map[string]string{"Idempotency-Key": randomHex(8), "Authorization": "Bearer " + token(t, buyer, auth.Buyer)})
	require.Equal(t, http.StatusCreated, status, "%v", resp)
	return resp["order_id"].(string)
}

// forgedToken is an admin token signed by a key the services do not know, with the local
// identity provider's key id, issuer and audience.
func forgedToken(t *testing.T) string {
	dir := t.TempDir()
	priv, _, err := auth.GenerateKey("local-idp")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "k.jwk"), priv, 0o600))
	s, err := auth.LoadSigner(filepath.Join(dir, "k.jwk"), "stockflow-local", "stockflow")
	require.NoError(t, err)
	tok, err := s.Mint("mallory", []auth.Role{auth.Admin, auth.Operator, auth.Approver}, "", time.Hour)
	require.NoError(t, err)
	return tok
}

// snapshot is everything the walked routes could change, read as staff.
func snapshot(t *testing.T, c client, sku, orderID, adjID string) map[string]any {
	out := map[string]any{}
	get := func(name, svc, path string) {
		status, body := c.call("GET", sys.URLs[svc]+path, nil, nil)
		out[name] = fmt.Sprint(status, body)
	}
	get("sku", "stock", "/v1/skus/"+sku)
	get("sku-b", "stock", "/v1/skus/"+sku+"-B")
	get("ledger", "stock", "/v1/skus/"+sku+"/ledger?limit=500")
	get("adjustment", "stock", "/v1/adjustments/"+adjID)
	get("order", "order", "/v1/orders/"+orderID)
	get("price", "order", "/v1/prices/"+sku)
	get("payments", "payment-adapter", "/v1/payments?order_id="+orderID)
	get("deadline", "timeout", "/v1/deadlines/"+orderID)
	return out
}

func ledger(t *testing.T, c client, sku string) []any {
	status, body := c.call("GET", sys.URLs["stock"]+"/v1/skus/"+sku+"/ledger?limit=500", nil, nil)
	require.Equal(t, http.StatusOK, status, "%v", body)
	rows, _ := body["entries"].([]any)
	require.NotEmpty(t, rows, "%v", body)
	return rows
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}
