package events

import (
	"errors"
	"time"
)

// SubjectOrderCreated is published by order when an order is accepted; stock locks its lines.
// Its subject carries the order's Key, order.created.<key>; producers built before the key
// publish order.created alone, which every consumer of it still reads.
const SubjectOrderCreated = "order.created"

// OrderCreated asks stock to lock every line of the order, all or none.
type OrderCreated struct {
	OrderID         string      `json:"order_id"`
	BuyerID         string      `json:"buyer_id"`
	Items           []OrderItem `json:"items"`
	Total           int64       `json:"total"`    // minor units
	Currency        string      `json:"currency"` // ISO 4217
	PaymentDeadline time.Time   `json:"payment_deadline"`
}

// OrderItem is one priced line of an order.
type OrderItem struct {
	SKU       string `json:"sku"`
	Qty       int64  `json:"qty"`
	UnitPrice int64  `json:"unit_price"`
}

// Subject implements Event.
func (OrderCreated) Subject() string { return SubjectOrderCreated }

// Key implements Keyed: the order's lowest SKU as a subject token, so that every order of a
// one-line SKU, and every order whose lines start at the same SKU, lands in one partition and
// is locked by one stock replica, in large batches.
func (e OrderCreated) Key() string {
	lead := ""
	for i, it := range e.Items {
		if i == 0 || it.SKU < lead {
			lead = it.SKU
		}
	}
	return SubjectKey(lead)
}

// Lines returns the SKU quantities of the order.
func (e OrderCreated) Lines() []Line {
	lines := make([]Line, len(e.Items))
	for i, it := range e.Items {
		lines[i] = Line{SKU: it.SKU, Qty: it.Qty}
	}
	return lines
}

func (e OrderCreated) validate() error {
	if err := need(map[string]string{"order_id": e.OrderID, "currency": e.Currency}); err != nil {
		return err
	}
	if e.PaymentDeadline.IsZero() {
		return errors.New("missing payment_deadline")
	}
	return validateLines(e.Lines())
}
