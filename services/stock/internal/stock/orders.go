package stock

import "time"

// LockRequest asks to lock every line of one order or none. Lines are normalized
// (NormalizeLines: merged and sorted by SKU).
type LockRequest struct {
	OrderID  string
	Lines    []Line
	Deadline time.Time
	Operator string
}

// LockResult is the outcome of an order's lock request.
type LockResult struct {
	OrderID   string
	Locked    bool
	Reason    string // why it was rejected: one of the Reject reasons
	SKU       string // the first line that did not fit
	Lines     []Line
	Deadline  time.Time
	Duplicate bool // the order had been seen: this is the first outcome, nothing changed now
}

// Rejection reasons recorded for an order whose lines could not all be locked.
const (
	RejectInsufficient = "insufficient_stock"
	RejectUnknownSKU   = "unknown_sku"
	RejectInvalidOrder = "invalid_order" // lines stock cannot parse (bad SKU, quantity out of range)
)

// LockUpdate asks to move one order's locks: Step transitions them and says which movements
// that makes.
type LockUpdate struct {
	OrderID  string
	Operator string
	Step     func([]*Lock) ([]Movement, error)
}

// LockUpdateResult is what one LockUpdate did: the ledger rows written (ids are filled in at
// commit), or the error that left the order unchanged.
type LockUpdateResult struct {
	Entries []LedgerEntry
	Err     error
}

// OrderOutcome is what stock knows of an order: the outcome of its lock request, the payment
// that sold it, and its lock rows.
type OrderOutcome struct {
	OrderID      string
	Outcome      string // locked | rejected
	RejectReason string
	RejectSKU    string
	PaidBy       string // the payment that sold the locks; "" when none did
	Deadline     time.Time
	Locks        []*Lock
	ReleasedBy   ChangeType // ChangeReleaseTimeout or ChangeReleaseCancel, the last release's; "" when never released
}

// Difference is one disagreement between a SKU's summary and the record it must equal.
type Difference struct {
	SKU     string `json:"sku"`
	Slot    int    `json:"slot"`
	Check   string `json:"check"` // ledger_fold | locks | ledger_chain
	Field   string `json:"field"`
	Summary int64  `json:"summary"`
	Expect  int64  `json:"expected"`
	Detail  string `json:"detail,omitempty"`
}
