package events

// Outcomes payment-adapter publishes after verifying a provider's notification.
const (
	SubjectPaymentSucceeded = "payment.succeeded"
	SubjectPaymentFailed    = "payment.failed"
	SubjectPaymentRefunded  = "payment.refunded"
	// SubjectPaymentNothingToRefund answers an order.refund_requested for an order no payment
	// of payment-adapter paid (contract 1.2).
	SubjectPaymentNothingToRefund = "payment.nothing_to_refund"
)

// PaymentSucceeded: the buyer paid the order's total; stock turns the lock into sold.
type PaymentSucceeded struct {
	PaymentID     string `json:"payment_id"`
	OrderID       string `json:"order_id"`
	Provider      string `json:"provider"`
	ProviderTxnID string `json:"provider_txn_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
}

// Subject implements Event.
func (PaymentSucceeded) Subject() string { return SubjectPaymentSucceeded }

func (e PaymentSucceeded) validate() error {
	return need(map[string]string{"payment_id": e.PaymentID, "order_id": e.OrderID})
}

// PaymentFailed: a notification was not a valid payment of the order (declined, or amount or
// currency not matching the order).
type PaymentFailed struct {
	PaymentID string `json:"payment_id"`
	OrderID   string `json:"order_id"`
	Reason    string `json:"reason"`
}

// Subject implements Event.
func (PaymentFailed) Subject() string { return SubjectPaymentFailed }

func (e PaymentFailed) validate() error {
	return need(map[string]string{"payment_id": e.PaymentID, "order_id": e.OrderID, "reason": e.Reason})
}

// PaymentRefunded: the money of a payment went back to the buyer.
type PaymentRefunded struct {
	PaymentID string `json:"payment_id"`
	OrderID   string `json:"order_id"`
	Amount    int64  `json:"amount"`
}

// Subject implements Event.
func (PaymentRefunded) Subject() string { return SubjectPaymentRefunded }

func (e PaymentRefunded) validate() error {
	return need(map[string]string{"payment_id": e.PaymentID, "order_id": e.OrderID})
}

// PaymentNothingToRefund: an order's refund was requested, but payment-adapter holds no
// succeeded payment of it: the order was sold by hand (stock's manual sell), so no money came
// through stockflow and none can go back through it. The order completes its refund on it
// (review F12); the money, if any, goes back the way it came.
type PaymentNothingToRefund struct {
	OrderID string `json:"order_id"`
}

// Subject implements Event.
func (PaymentNothingToRefund) Subject() string { return SubjectPaymentNothingToRefund }

func (e PaymentNothingToRefund) validate() error {
	return need(map[string]string{"order_id": e.OrderID})
}
