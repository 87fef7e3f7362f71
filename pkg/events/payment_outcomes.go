package events

// Outcomes payment-adapter publishes after verifying a provider's notification.
const (
	SubjectPaymentSucceeded = "payment.succeeded"
	SubjectPaymentFailed    = "payment.failed"
	SubjectPaymentRefunded  = "payment.refunded"
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
