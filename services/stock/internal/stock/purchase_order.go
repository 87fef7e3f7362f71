package stock

import (
	"errors"
	"fmt"
	"time"
)

// Purchase order errors.
var (
	ErrPurchaseOrderNotFound = errors.New("purchase order not found")
	ErrPurchaseOrderNotOpen  = errors.New("purchase order is not open: fully received or closed")
	ErrOverReceipt           = errors.New("receipt is more than the purchase order still expects")
	ErrBadRemark             = errors.New("remark is at most 500 bytes of UTF-8, with no NUL")
)

// MaxRemark bounds a remark, in bytes.
const MaxRemark = 500

// ValidRemark returns ErrBadRemark unless s is a remark the ledger can hold.
func ValidRemark(s string) error {
	if len(s) > MaxRemark || !ValidText(s) {
		return ErrBadRemark
	}
	return nil
}

// PurchaseOrderStatus is where a purchase order stands; it is derived from its figures
// (PurchaseOrder.Status), never stored.
type PurchaseOrderStatus string

// Purchase order statuses.
const (
	PurchaseOrderOpen              PurchaseOrderStatus = "open"
	PurchaseOrderPartiallyReceived PurchaseOrderStatus = "partially_received"
	PurchaseOrderReceived          PurchaseOrderStatus = "received"
	PurchaseOrderClosed            PurchaseOrderStatus = "closed" // the rest will never arrive
)

// PurchaseOrder is units of a SKU ordered from a supplier: Expected of them raised incoming
// when it was placed, each receipt moves some from incoming to on_hand, and closing it takes
// what never arrived out of incoming. Its movements carry its remark (Tag), so the ledger
// alone says which purchase order a row belongs to.
type PurchaseOrder struct {
	ID        int64
	SKU       string
	Expected  int64
	Received  int64
	Remark    string
	CreatedBy string
	CreatedAt time.Time
	ClosedBy  string     // "" while not closed
	ClosedAt  *time.Time // nil while not closed
	Receipts  []Receipt  // oldest first
}

// Receipt is one delivery against a purchase order: its purchase_inbound ledger row.
type Receipt struct {
	LedgerID int64
	Qty      int64
	Operator string
	Remark   string
	At       time.Time
}

// NewPurchaseOrder validates a purchase order of n units of sku placed by by.
func NewPurchaseOrder(sku string, n Qty, remark, by string) (PurchaseOrder, error) {
	if err := ValidSKU(sku); err != nil {
		return PurchaseOrder{}, err
	}
	if err := ValidRemark(remark); err != nil {
		return PurchaseOrder{}, err
	}
	return PurchaseOrder{SKU: sku, Expected: n.n, Remark: remark, CreatedBy: by}, nil
}

// Status is open until something arrives, partially_received until all has, received then;
// closed once closed, whatever arrived.
func (p PurchaseOrder) Status() PurchaseOrderStatus {
	switch {
	case p.ClosedAt != nil:
		return PurchaseOrderClosed
	case p.Received == p.Expected:
		return PurchaseOrderReceived
	case p.Received > 0:
		return PurchaseOrderPartiallyReceived
	}
	return PurchaseOrderOpen
}

// outstanding is what may still arrive: 0 once received or closed.
func (p PurchaseOrder) outstanding() int64 {
	if p.ClosedAt != nil {
		return 0
	}
	return p.Expected - p.Received
}

// Tag is the remark of the purchase order's ledger rows: its id, then remark (the receipt's,
// the order's), so a ledger row says which purchase order it belongs to.
func (p PurchaseOrder) Tag(remark string) string {
	if remark == "" {
		return fmt.Sprintf("purchase order %d", p.ID)
	}
	return fmt.Sprintf("purchase order %d: %s", p.ID, remark)
}

// Expect is the movement that places the order: incoming + Expected.
func (p PurchaseOrder) Expect() Movement {
	m := PurchaseExpectedMovement(p.SKU, Qty{p.Expected})
	m.Remark = p.Tag(p.Remark)
	return m
}

// Receive returns the movement of a receipt of n units: ErrPurchaseOrderNotOpen once the order
// is received or closed, ErrOverReceipt when n is more than it still expects.
func (p PurchaseOrder) Receive(n Qty, remark string) (Movement, error) {
	if err := ValidRemark(remark); err != nil {
		return Movement{}, err
	}
	switch rest := p.outstanding(); {
	case rest == 0:
		return Movement{}, fmt.Errorf("%w: purchase order %d is %s", ErrPurchaseOrderNotOpen, p.ID, p.Status())
	case n.n > rest:
		return Movement{}, fmt.Errorf("%w: purchase order %d expects %d more, got %d", ErrOverReceipt, p.ID, rest, n.n)
	}
	m := PurchaseInboundMovement(p.SKU, n)
	m.Remark = p.Tag(remark)
	return m, nil
}

// Close returns the movement that takes what never arrived out of incoming; ok=false when the
// order is closed already (closing again changes nothing). A fully received order has nothing
// to close: ErrPurchaseOrderNotOpen.
func (p PurchaseOrder) Close() (m Movement, ok bool, err error) {
	if p.ClosedAt != nil {
		return Movement{}, false, nil
	}
	rest := p.outstanding()
	if rest == 0 {
		return Movement{}, false, fmt.Errorf("%w: purchase order %d is %s", ErrPurchaseOrderNotOpen, p.ID, p.Status())
	}
	m = PurchaseCancelledMovement(p.SKU, Qty{rest})
	m.Remark = p.Tag(fmt.Sprintf("closed, %d of %d never arrived", rest, p.Expected))
	return m, true, nil
}
