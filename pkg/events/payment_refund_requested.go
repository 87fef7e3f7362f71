package events

// SubjectPaymentRefundRequested is payment-adapter's own: the first step of a refund, written
// to its outbox in the transaction that records the refund request, and consumed by
// payment-adapter itself, which then asks the provider outside any transaction. No other
// service acts on it.
const SubjectPaymentRefundRequested = "payment.refund_requested"

// PaymentRefundRequested: the refund RefundID of payment PaymentID was recorded and must be
// asked of the payment's provider (RefundID is the provider's idempotency key).
type PaymentRefundRequested struct {
	PaymentID string `json:"payment_id"`
	OrderID   string `json:"order_id"`
	RefundID  string `json:"refund_id"`
	Reason    string `json:"reason,omitempty"`
}

// Subject implements Event.
func (PaymentRefundRequested) Subject() string { return SubjectPaymentRefundRequested }

func (e PaymentRefundRequested) validate() error {
	return need(map[string]string{"payment_id": e.PaymentID, "order_id": e.OrderID, "refund_id": e.RefundID})
}
