package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSKU(t *testing.T, c client, onHand int64) string {
	sku := "E2E-" + randomHex(4)
	c.createSKU(sku, onHand)
	return sku
}

func figures(c client, sku string) [4]float64 {
	s := c.sku(sku)
	return [4]float64{s["on_hand"].(float64), s["available"].(float64), s["locked"].(float64), s["sold"].(float64)}
}

func TestPaidOrderIsSold(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 10)
	id := c.order("30m", item{SKU: sku, Qty: 2, UnitPrice: 4900})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	assert.Equal(t, [4]float64{10, 8, 2, 0}, figures(c, sku))

	status, body := c.pay(id, 9800, "txn-"+id)
	require.Equal(t, http.StatusOK, status, "%v", body)
	o := c.waitStatus(id, "paid", 10*time.Second)
	assert.Equal(t, [4]float64{10, 8, 0, 2}, figures(c, sku))
	assert.NotEmpty(t, o["history"])
	c.requireConsistent()
}

func TestUnpaidOrderIsReleasedAtItsDeadline(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 5)
	id := c.order("2s", item{SKU: sku, Qty: 3, UnitPrice: 100})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	assert.Equal(t, [4]float64{5, 2, 3, 0}, figures(c, sku))
	c.waitStatus(id, "closed", 15*time.Second)
	assert.Equal(t, [4]float64{5, 5, 0, 0}, figures(c, sku))
	c.requireConsistent()
}

func TestCancelReleases(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 5)
	id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 100})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	status, body := c.call("POST", sys.URLs["order"]+"/v1/orders/"+id+"/cancel", nil, nil)
	require.Less(t, status, 300, "%v", body)
	c.waitStatus(id, "cancelled", 10*time.Second)
	assert.Equal(t, [4]float64{5, 5, 0, 0}, figures(c, sku))
	c.requireConsistent()
}

func TestRefundRestocksAndShipDeducts(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 10)
	refunded := c.order("30m", item{SKU: sku, Qty: 2, UnitPrice: 500})
	shipped := c.order("30m", item{SKU: sku, Qty: 3, UnitPrice: 500})
	for id, amount := range map[string]int64{refunded: 1000, shipped: 1500} {
		c.waitStatus(id, "awaiting_payment", 10*time.Second)
		status, body := c.pay(id, amount, "txn-"+id)
		require.Equal(t, http.StatusOK, status, "%v", body)
		c.waitStatus(id, "paid", 10*time.Second)
	}
	assert.Equal(t, [4]float64{10, 5, 0, 5}, figures(c, sku))

	status, body := c.call("POST", sys.URLs["order"]+"/v1/orders/"+refunded+"/refund", nil, nil)
	require.Less(t, status, 300, "%v", body)
	c.waitStatus(refunded, "refunded", 10*time.Second)
	status, body = c.call("POST", sys.URLs["order"]+"/v1/orders/"+shipped+"/ship", nil, nil)
	require.Less(t, status, 300, "%v", body)
	c.waitStatus(shipped, "shipped", 10*time.Second)
	require.Eventually(t, func() bool { return figures(c, sku) == [4]float64{7, 7, 0, 0} }, 10*time.Second, 50*time.Millisecond,
		"refund restocks 2 (available 7), ship takes 3 from on_hand and sold: got %v", figures(c, sku))
	c.requireConsistent()
}

// TestRefundOfAnOrderSoldByHandCompletes is review F12: an order sold through stock's internal
// API has no payment in payment-adapter. Its refund restocks it and answers
// payment.nothing_to_refund, so the order ends refunded instead of waiting in refund_pending
// for ever.
func TestRefundOfAnOrderSoldByHandCompletes(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 10)
	id := c.order("30m", item{SKU: sku, Qty: 2, UnitPrice: 500})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	status, body := c.call("POST", sys.URLs["stock"]+"/v1/internal/orders/"+id+"/sell", nil, nil)
	require.Less(t, status, 300, "%v", body)
	c.waitStatus(id, "paid", 10*time.Second)
	status, body = c.call("POST", sys.URLs["order"]+"/v1/orders/"+id+"/ship", nil, nil)
	require.Less(t, status, 300, "%v", body)
	c.waitStatus(id, "shipped", 10*time.Second)

	status, body = c.call("POST", sys.URLs["order"]+"/v1/orders/"+id+"/refund", nil, nil)
	require.Less(t, status, 300, "%v", body)
	o := c.waitStatus(id, "refunded", 20*time.Second)
	var reasons []string // of the entries that made it refunded (stock's restock note may come later)
	for _, h := range o["history"].([]any) {
		if h := h.(map[string]any); h["status"] == "refunded" {
			reasons = append(reasons, h["reason"].(string))
		}
	}
	require.NotEmpty(t, reasons)
	assert.Contains(t, reasons[0], "no payment to refund")
	require.Eventually(t, func() bool { return figures(c, sku) == [4]float64{10, 10, 0, 0} }, 10*time.Second, 50*time.Millisecond,
		"the returned goods are back on hand: got %v", figures(c, sku))
	status, body = c.call("GET", sys.URLs["payment-adapter"]+"/v1/payments?order_id="+id, nil, nil)
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Empty(t, body["payments"], "no payment was made or refunded")
	c.requireConsistent()
}

// TestASuccessAfterADeclineSells is review F11's second point: the provider reports one
// transaction failed, then succeeded (a buyer trying again on the same Stripe PaymentIntent).
// The order is paid and its stock sold; the payment is one, succeeded.
func TestASuccessAfterADeclineSells(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 5)
	id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 700})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	status, body := c.notify(id, 700, "txn-"+id, "failed")
	require.Equal(t, http.StatusOK, status, "%v", body)
	status, body = c.notify(id, 700, "txn-"+id, "succeeded")
	require.Equal(t, http.StatusOK, status, "%v", body)
	c.waitStatus(id, "paid", 10*time.Second)
	assert.Equal(t, [4]float64{5, 4, 0, 1}, figures(c, sku))
	payments := c.payments(id)
	require.Len(t, payments, 1)
	assert.Equal(t, "succeeded", payments[0]["status"])
	c.requireConsistent()
}

func TestLatePaymentIsResoldWhenStockAllows(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 5)
	id := c.order("1s", item{SKU: sku, Qty: 2, UnitPrice: 100})
	c.waitStatus(id, "closed", 15*time.Second)
	status, body := c.pay(id, 200, "txn-"+id)
	require.Equal(t, http.StatusOK, status, "%v", body)
	c.waitStatus(id, "paid", 10*time.Second)
	assert.Equal(t, [4]float64{5, 3, 0, 2}, figures(c, sku))
	c.requireConsistent()
}

func TestLatePaymentWithoutStockIsRefunded(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 2)
	late := c.order("1s", item{SKU: sku, Qty: 2, UnitPrice: 100})
	c.waitStatus(late, "closed", 15*time.Second)
	winner := c.order("30m", item{SKU: sku, Qty: 2, UnitPrice: 100})
	c.waitStatus(winner, "awaiting_payment", 10*time.Second)

	status, body := c.pay(late, 200, "txn-"+late)
	require.Equal(t, http.StatusOK, status, "%v", body)
	c.waitStatus(late, "refunded", 15*time.Second)
	assert.Equal(t, [4]float64{2, 0, 2, 0}, figures(c, sku), "the winner's lock is untouched")
	c.requireConsistent()
}

func TestRejectedWhenStockIsShort(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 1)
	id := c.order("30m", item{SKU: sku, Qty: 2, UnitPrice: 100})
	c.waitStatus(id, "rejected", 10*time.Second)
	assert.Equal(t, [4]float64{1, 1, 0, 0}, figures(c, sku))
	c.requireConsistent()
}

func TestDuplicateCallbackChangesNothing(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 5)
	id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 300})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	for range 3 {
		status, body := c.pay(id, 300, "txn-dup-"+id)
		require.Equal(t, http.StatusOK, status, "%v", body)
	}
	c.waitStatus(id, "paid", 10*time.Second)
	time.Sleep(500 * time.Millisecond) // give a wrongly duplicated event the time to land
	assert.Equal(t, [4]float64{5, 4, 0, 1}, figures(c, sku))
	status, body := c.call("GET", sys.URLs["stock"]+"/v1/skus/"+sku+"/ledger", nil, nil)
	require.Equal(t, http.StatusOK, status)
	sells := 0
	for _, e := range body["entries"].([]any) {
		if e.(map[string]any)["change_type"] == "sell" {
			sells++
		}
	}
	assert.Equal(t, 1, sells)
	c.requireConsistent()
}
