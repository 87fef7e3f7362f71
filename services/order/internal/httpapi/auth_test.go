package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
)

// TestOnlyTheBuyerAndStaffActOnAnOrder: buyer u2 can neither read, list, cancel, refund nor
// ship buyer u1's order, nor place one in u1's name; a viewer reads but may not cancel;
// a missing or forged token is 401. Nothing is written by any refused call.
func TestOnlyTheBuyerAndStaffActOnAnOrder(t *testing.T) {
	e := setup(t)
	resp := e.place(t, "key-1", validBody) // as u1
	require.Equal(t, http.StatusCreated, resp.status, "%v", resp.body)
	id := resp.body["order_id"].(string)
	rows := func() int {
		return e.count(t, `SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM order_history) + (SELECT count(*) FROM outbox)`)
	}
	before := rows()

	u2 := e.kit.Bearer("u2", auth.Buyer)
	viewer := e.kit.Bearer("vera", auth.Viewer)
	forged := authtest.New(t).Bearer("u1", auth.Buyer)
	for _, c := range []struct {
		name, method, path, bearer, body string
		status                           int
		code                             string
	}{
		{"no token", "GET", "/v1/orders/" + id, "", "", 401, "unauthenticated"},
		{"forged token", "GET", "/v1/orders/" + id, forged, "", 401, "invalid_token"},
		{"another buyer reads", "GET", "/v1/orders/" + id, u2, "", 403, "forbidden"},
		{"another buyer lists", "GET", "/v1/orders?buyer_id=u1", u2, "", 403, "forbidden"},
		{"another buyer cancels", "POST", "/v1/orders/" + id + "/cancel", u2, "", 403, "forbidden"},
		{"a buyer refunds", "POST", "/v1/orders/" + id + "/refund", e.kit.Bearer("u1", auth.Buyer), "", 403, "forbidden"},
		{"a buyer ships", "POST", "/v1/orders/" + id + "/ship", e.kit.Bearer("u1", auth.Buyer), "", 403, "forbidden"},
		{"a viewer cancels", "POST", "/v1/orders/" + id + "/cancel", viewer, "", 403, "forbidden"},
		{"a viewer places", "POST", "/v1/orders", viewer, validBody, 403, "forbidden"},
		{"placing in another buyer's name", "POST", "/v1/orders", u2, validBody, 403, "forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := map[string]string{"Authorization": c.bearer, "Idempotency-Key": "k-" + c.name}
			got := e.do(t, c.method, c.path, h, c.body)
			assert.Equal(t, c.status, got.status, "%v", got.body)
			assert.Equal(t, c.code, got.code())
			assert.Equal(t, before, rows(), "nothing written")
		})
	}

	// What is allowed: the buyer reads and lists their own, a viewer reads any.
	own := e.kit.Bearer("u1", auth.Buyer)
	assert.Equal(t, http.StatusOK, e.do(t, "GET", "/v1/orders/"+id, map[string]string{"Authorization": own}, "").status)
	list := e.do(t, "GET", "/v1/orders", map[string]string{"Authorization": own}, "")
	require.Equal(t, http.StatusOK, list.status, "%v", list.body)
	assert.Len(t, list.body["orders"], 1, "a buyer's list defaults to their own orders")
	assert.Equal(t, http.StatusOK, e.do(t, "GET", "/v1/orders/"+id, map[string]string{"Authorization": viewer}, "").status)
	cancel := e.do(t, "POST", "/v1/orders/"+id+"/cancel", map[string]string{"Authorization": own}, "")
	assert.Equal(t, http.StatusAccepted, cancel.status, "%v", cancel.body)
}
