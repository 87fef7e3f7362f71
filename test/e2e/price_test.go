package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheServerPricesAndAOneFenPaymentDoesNotPay (F3, F11): the order service prices the
// order, refuses a tampered price, and bounds the payment window; a signed payment of 1 fen
// for the 4,900-fen order does not make it paid — it is refunded — while the right amount
// does.
func TestTheServerPricesAndAOneFenPaymentDoesNotPay(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 10) // 49.00 CNY
	buyer := "u-" + randomHex(3)

	status, body := c.place(buyer, map[string]any{"items": []item{{SKU: sku, Qty: 1, UnitPrice: 1}}})
	require.Equal(t, http.StatusConflict, status, "%v", body)
	assert.Equal(t, "price_mismatch", errorCode(body))
	status, body = c.place(buyer, map[string]any{"items": []item{{SKU: sku, Qty: 1}}, "payment_timeout": "24h"})
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", body)
	assert.Equal(t, "payment_timeout_too_long", errorCode(body))
	assert.Equal(t, [4]float64{10, 10, 0, 0}, figures(c, sku), "nothing reached stock")

	id := c.order("", item{SKU: sku, Qty: 1})
	o := c.waitStatus(id, "awaiting_payment", 10*time.Second)
	assert.Equal(t, float64(4900), o["total"], "the server's price")
	assert.Equal(t, "30m0s", o["payment_timeout"], "the server's window")

	status, body = c.pay(id, 1, "txn-1fen-"+id)
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Equal(t, "failed", body["status"], "the 1 fen does not pay; its refund is requested (and made below)")
	require.Eventually(t, func() bool {
		for _, h := range c.getOrder(id)["history"].([]any) {
			if strings.Contains(h.(map[string]any)["reason"].(string), "amount_mismatch") {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the order notes the failed payment")
	assert.Equal(t, "awaiting_payment", c.getOrder(id)["status"], "not paid")
	assert.Equal(t, [4]float64{10, 9, 1, 0}, figures(c, sku), "not sold")

	status, body = c.pay(id, 4900, "txn-"+id)
	require.Equal(t, http.StatusOK, status, "%v", body)
	c.waitStatus(id, "paid", 10*time.Second)
	assert.Equal(t, [4]float64{10, 9, 0, 1}, figures(c, sku))
	var statuses []any
	require.Eventually(t, func() bool {
		status, body = c.call("GET", sys.URLs["payment-adapter"]+"/v1/payments?order_id="+id, nil, nil)
		require.Equal(t, http.StatusOK, status, "%v", body)
		statuses = nil
		for _, p := range body["payments"].([]any) {
			statuses = append(statuses, p.(map[string]any)["status"])
		}
		return slices.Equal(statuses, []any{"refunded", "succeeded"})
	}, 15*time.Second, 100*time.Millisecond, "the 1 fen goes back through the provider: %v", statuses)
	c.requireConsistent()
}

// TestASKUsPaymentWindowApplies: a promotion's SKU with a 2 s window closes its orders after
// 2 s; a request may shorten the window, not lengthen it; a SKU with no price is not for sale.
func TestASKUsPaymentWindowApplies(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 5)
	c.setPrice(sku, 990, "2s")
	status, body := c.place("u-"+randomHex(3), map[string]any{"items": []item{{SKU: sku, Qty: 1}}, "payment_timeout": "3s"})
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", body)
	assert.Equal(t, "payment_timeout_too_long", errorCode(body))

	id := c.order("", item{SKU: sku, Qty: 2})
	o := c.waitStatus(id, "awaiting_payment", 10*time.Second)
	assert.Equal(t, "2s", o["payment_timeout"])
	assert.Equal(t, float64(1980), o["total"])
	c.waitStatus(id, "closed", 15*time.Second)
	assert.Equal(t, [4]float64{5, 5, 0, 0}, figures(c, sku))

	unpriced := "E2E-" + randomHex(4)
	status, body = c.call("POST", sys.URLs["stock"]+"/v1/skus", map[string]any{"sku": unpriced, "on_hand": 5}, nil)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	status, body = c.place("u-"+randomHex(3), map[string]any{"items": []item{{SKU: unpriced, Qty: 1}}})
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", body)
	assert.Equal(t, "sku_not_for_sale", errorCode(body))
	c.requireConsistent()
}
