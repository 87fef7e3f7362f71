package events

import (
	"net/http"
	"net/url"
	"time"
)

// StockOrder is stock's record of an order, the body of its GET /v1/internal/orders/{id}
// (StockOrderPath): the outcome of the lock request, the payment that sold the order and its
// locks. The order and payment-adapter reconciliation jobs read it (stuck orders, paid but not
// sold); 404 order_not_found when stock never saw the order.
//
// It is a response, not an event (no subject, no envelope), and it lives here because this
// package is the contract between the services: a shared client package would hold this type
// and a path, where each caller's request is already one httpx.GetJSON.
type StockOrder struct {
	OrderID      string           `json:"order_id"`
	Outcome      string           `json:"outcome"` // locked | rejected
	RejectReason string           `json:"reject_reason,omitempty"`
	RejectSKU    string           `json:"reject_sku,omitempty"`
	PaidBy       string           `json:"paid_by,omitempty"` // the payment that sold the order
	Deadline     time.Time        `json:"deadline"`
	Locks        []StockOrderLock `json:"locks"` // resolved together: one state for all
	// ReleasedBy is what released the locks, ReleaseTimeout or ReleaseCancel, when they were
	// released: the one that reached them first, which a cancel request does not decide.
	ReleasedBy string `json:"released_by,omitempty"`
}

// StockOrderLock is one lock of a StockOrder.
type StockOrderLock struct {
	SKU      string    `json:"sku"`
	Qty      int64     `json:"qty"`
	State    string    `json:"state"` // locked | sold | released | shipped | refunded
	Deadline time.Time `json:"deadline"`
}

// OrderNotFound is the error code of a 404 that means "no such order", from stock's
// StockOrderPath and the order service's GET /v1/orders/{id} alike (the contract's error body,
// {"error":{"code":…}}). A 404 with another code, or none — route_not_found from a base path
// that is wrong, a gateway's own page — says nothing about the order, and the reconciliation
// jobs that act on an unknown order leave it alone.
const OrderNotFound = "order_not_found"

// NoSuchOrder says whether an answer (its status and error code, httpx.GetJSON's) is the
// service's word that it has no such order.
func NoSuchOrder(status int, code string) bool {
	return status == http.StatusNotFound && code == OrderNotFound
}

// StockOrderPath is the path of an order's StockOrder on the stock service.
func StockOrderPath(orderID string) string {
	return "/v1/internal/orders/" + url.PathEscape(orderID)
}
