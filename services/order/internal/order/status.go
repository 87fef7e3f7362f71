package order

import "fmt"

// Status is where an order is in its life. It is a closed type: the only values are the
// package-level variables below, and the zero Status is invalid.
type Status struct{ name string }

// The statuses of DESIGN §9. Terminal ones are marked; "unless" names the one event that can
// still move them.
var (
	// Pending: accepted, waiting for stock to lock every line.
	Pending = Status{"pending"}
	// AwaitingPayment: stock is locked until the payment deadline.
	AwaitingPayment = Status{"awaiting_payment"}
	// Rejected (terminal unless a payment for it fails to sell): not enough stock.
	Rejected = Status{"rejected"}
	// Paid: stock is sold, the order can ship or be refunded.
	Paid = Status{"paid"}
	// Closed (terminal unless a late payment re-sells it): the payment deadline passed and
	// the locks were released.
	Closed = Status{"closed"}
	// Cancelled (terminal unless a late payment re-sells it): cancelled before payment.
	Cancelled = Status{"cancelled"}
	// Shipped (terminal unless refunded): the goods left the warehouse.
	Shipped = Status{"shipped"}
	// RefundPending: the money must go back (a requested refund, or a payment that could
	// not be fulfilled); waiting for payment.refunded.
	RefundPending = Status{"refund_pending"}
	// Refunded (terminal): the money went back to the buyer.
	Refunded = Status{"refunded"}
)

var statuses = []Status{Pending, AwaitingPayment, Rejected, Paid, Closed, Cancelled, Shipped, RefundPending, Refunded}

// Statuses returns every status, in life-cycle order.
func Statuses() []Status { return append([]Status(nil), statuses...) }

// ParseStatus returns the status named s, or an error for any other string.
func ParseStatus(s string) (Status, error) {
	for _, st := range statuses {
		if st.name == s {
			return st, nil
		}
	}
	return Status{}, fmt.Errorf("unknown order status %q", s)
}

// String returns the status's wire name ("awaiting_payment").
func (s Status) String() string { return s.name }

// IsZero reports whether s is the invalid zero Status.
func (s Status) IsZero() bool { return s.name == "" }

func (s Status) in(set ...Status) bool {
	for _, o := range set {
		if s == o {
			return true
		}
	}
	return false
}
