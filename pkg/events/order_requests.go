package events

// Requests the order service makes of the others after an order was accepted.
const (
	SubjectOrderCancelRequested = "order.cancel_requested"
	SubjectOrderRefundRequested = "order.refund_requested"
	SubjectOrderShipped         = "order.shipped"
)

// OrderCancelRequested asks stock to release the order's locks if they are still held.
type OrderCancelRequested struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason,omitempty"`
}

// Subject implements Event.
func (OrderCancelRequested) Subject() string { return SubjectOrderCancelRequested }

func (e OrderCancelRequested) validate() error { return need(map[string]string{"order_id": e.OrderID}) }

// OrderRefundRequested asks stock to restock a paid order and payment-adapter to pay it back.
type OrderRefundRequested struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason,omitempty"`
}

// Subject implements Event.
func (OrderRefundRequested) Subject() string { return SubjectOrderRefundRequested }

func (e OrderRefundRequested) validate() error { return need(map[string]string{"order_id": e.OrderID}) }

// OrderShipped tells stock that a paid order left the warehouse: sold and on_hand drop.
type OrderShipped struct {
	OrderID string `json:"order_id"`
}

// Subject implements Event.
func (OrderShipped) Subject() string { return SubjectOrderShipped }

func (e OrderShipped) validate() error { return need(map[string]string{"order_id": e.OrderID}) }
