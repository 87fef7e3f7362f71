package events

import "time"

// Outcomes the stock service publishes; order follows them, timeout and payment-adapter too.
const (
	SubjectStockLocked       = "stock.locked"
	SubjectStockLockRejected = "stock.lock_rejected"
	SubjectStockSold         = "stock.sold"
	SubjectStockSellFailed   = "stock.sell_failed"
	SubjectStockReleased     = "stock.released"
	SubjectStockRestocked    = "stock.restocked"
	SubjectStockShipped      = "stock.shipped"
)

// StockLocked: every line of the order is locked until PaymentDeadline.
type StockLocked struct {
	OrderID         string    `json:"order_id"`
	Lines           []Line    `json:"lines"`
	PaymentDeadline time.Time `json:"payment_deadline"`
}

// Subject implements Event.
func (StockLocked) Subject() string { return SubjectStockLocked }

func (e StockLocked) validate() error {
	if err := need(map[string]string{"order_id": e.OrderID}); err != nil {
		return err
	}
	return validateLines(e.Lines)
}

// StockLockRejected: the order could not be locked (SKU names the first line that did not fit).
type StockLockRejected struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"` // insufficient_stock | unknown_sku
	SKU     string `json:"sku,omitempty"`
}

// Subject implements Event.
func (StockLockRejected) Subject() string { return SubjectStockLockRejected }

func (e StockLockRejected) validate() error {
	return need(map[string]string{"order_id": e.OrderID, "reason": e.Reason})
}

// StockSold: the order's locks became sold. Relocked says the locks had been released first
// (a late payment) and stock was taken again.
type StockSold struct {
	OrderID  string `json:"order_id"`
	Relocked bool   `json:"relocked,omitempty"`
}

// Subject implements Event.
func (StockSold) Subject() string { return SubjectStockSold }

func (e StockSold) validate() error { return need(map[string]string{"order_id": e.OrderID}) }

// StockSellFailed: a payment arrived but the order's stock could not be sold (released and no
// longer available, or never locked); the payment must be refunded.
type StockSellFailed struct {
	OrderID   string `json:"order_id"`
	PaymentID string `json:"payment_id"`
	Reason    string `json:"reason"`
}

// Subject implements Event.
func (StockSellFailed) Subject() string { return SubjectStockSellFailed }

func (e StockSellFailed) validate() error {
	return need(map[string]string{"order_id": e.OrderID, "reason": e.Reason})
}

// Release reasons.
const (
	ReleaseTimeout = "timeout"
	ReleaseCancel  = "cancel"
)

// StockReleased: the order's locks went back to available (Reason: timeout or cancel).
type StockReleased struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// Subject implements Event.
func (StockReleased) Subject() string { return SubjectStockReleased }

func (e StockReleased) validate() error {
	return need(map[string]string{"order_id": e.OrderID, "reason": e.Reason})
}

// StockRestocked: a refunded order's units went back to stock.
type StockRestocked struct {
	OrderID string `json:"order_id"`
}

// Subject implements Event.
func (StockRestocked) Subject() string { return SubjectStockRestocked }

func (e StockRestocked) validate() error { return need(map[string]string{"order_id": e.OrderID}) }

// StockShipped: a shipped order's units left sold and on_hand.
type StockShipped struct {
	OrderID string `json:"order_id"`
}

// Subject implements Event.
func (StockShipped) Subject() string { return SubjectStockShipped }

func (e StockShipped) validate() error { return need(map[string]string{"order_id": e.OrderID}) }
