// Package stock is the inventory domain: the quantities of a SKU, the transitions between them
// (each one a Movement and a ledger row), and the per-order lock that resolves at most once.
// It is pure Go: storage lives in internal/postgres, transport in internal/httpapi.
package stock

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stockflow/stockflow/pkg/events"
)

// Domain errors. Transports map them to stable codes in one place.
var (
	ErrInsufficientStock  = errors.New("insufficient stock")
	ErrUnknownSKU         = errors.New("unknown sku")
	ErrSKUExists          = errors.New("sku already exists")
	ErrBadSKU             = errors.New("sku must be 1-64 characters of A-Z a-z 0-9 . _ : -, starting with a letter or digit")
	ErrNoLock             = errors.New("order holds no lock")
	ErrOrderUnknown       = errors.New("order not seen by stock yet")
	ErrLockNotHeld        = errors.New("lock is not held")
	ErrAlreadyResolved    = errors.New("lock already resolved")
	ErrBadOrder           = errors.New("invalid order lines")
	ErrIdempotencyReuse   = errors.New("idempotency key already used for a different request")
	ErrBadAdjustment      = errors.New("invalid adjustment")
	ErrAdjustmentNotFound = errors.New("adjustment not found")
	ErrAdjustmentDecided  = errors.New("adjustment already decided")
	ErrSelfApproval       = errors.New("an adjustment must be approved by someone other than its requester")
	ErrStocktakeConflict  = errors.New("stocktake conflicts with the stock as it is now")
	ErrNotYetDue          = errors.New("lock not yet due")
)

// ValidSKU returns ErrBadSKU unless s is a well-formed SKU id (the contract's syntax).
func ValidSKU(s string) error {
	if !events.ValidSKU(s) {
		return fmt.Errorf("%w: %q", ErrBadSKU, s)
	}
	return nil
}

// ChangeType names a transition; each ledger row has exactly one. The set is closed
// (ChangeTypes; ParseChangeType).
type ChangeType string

// The transitions of DESIGN §3, plus purchase_expected (a purchase order raises incoming) and
// purchase_cancelled (a closed purchase order's units that will never arrive leave incoming).
const (
	ChangeLock             ChangeType = "lock"
	ChangeSell             ChangeType = "sell"
	ChangeReleaseTimeout   ChangeType = "release_timeout"
	ChangeReleaseCancel    ChangeType = "release_cancel"
	ChangeRefundRestock    ChangeType = "refund_restock"
	ChangeShip             ChangeType = "ship"
	ChangePurchaseExpected ChangeType = "purchase_expected"
	ChangePurchaseInbound  ChangeType = "purchase_inbound"
	// ChangePurchaseCancelled takes what a closed purchase order never delivered out of
	// incoming (incoming - n); nothing else moves.
	ChangePurchaseCancelled ChangeType = "purchase_cancelled"
	ChangeManualAdjust      ChangeType = "manual_adjust"
	ChangeStocktake         ChangeType = "stocktake"
	// ChangeRebalance moves available units between two slots of a SKU: a pair of rows, one
	// out of a slot (on_hand - n), one into another (on_hand + n). The SKU's totals stay.
	ChangeRebalance ChangeType = "rebalance"
)

// Movement is one transition of one SKU: the summary moves by Delta and one ledger row records
// it. Qty is the number of units moved (always positive).
type Movement struct {
	SKU     string
	Type    ChangeType
	Qty     Qty
	Delta   Quantities
	OrderID string // empty for movements not tied to an order
	Remark  string
}

// RebalanceMovements move n available units of sku out of one slot and into another.
func RebalanceMovements(sku string, n Qty) (out, in Movement) {
	out = Movement{SKU: sku, Type: ChangeRebalance, Qty: n, Delta: Quantities{OnHand: -n.n}}
	in = Movement{SKU: sku, Type: ChangeRebalance, Qty: n, Delta: Quantities{OnHand: n.n}}
	return out, in
}

// Takes reports whether m draws on available (a lock, a late payment re-locking, on_hand
// going down): with slots, such a movement may take any slot that has enough.
func (m Movement) Takes() bool { return m.Delta.OnHand-m.Delta.Locked-m.Delta.Sold < 0 }

// Fits reports whether applying m to q keeps every figure non-negative.
func (m Movement) Fits(q Quantities) bool { return q.Plus(m.Delta).Valid() }

// LockMovement takes n units of sku from available into locked for an order.
func LockMovement(orderID, sku string, n Qty) Movement {
	return Movement{SKU: sku, Type: ChangeLock, Qty: n, OrderID: orderID, Delta: Quantities{Locked: n.n}}
}

// PurchaseExpectedMovement raises incoming by n (a purchase order was placed).
func PurchaseExpectedMovement(sku string, n Qty) Movement {
	return Movement{SKU: sku, Type: ChangePurchaseExpected, Qty: n, Delta: Quantities{Incoming: n.n}}
}

// PurchaseInboundMovement receives n units: incoming - n, on_hand + n.
func PurchaseInboundMovement(sku string, n Qty) Movement {
	return Movement{SKU: sku, Type: ChangePurchaseInbound, Qty: n, Delta: Quantities{Incoming: -n.n, OnHand: n.n}}
}

// PurchaseCancelledMovement takes n units that will never arrive out of incoming.
func PurchaseCancelledMovement(sku string, n Qty) Movement {
	return Movement{SKU: sku, Type: ChangePurchaseCancelled, Qty: n, Delta: Quantities{Incoming: -n.n}}
}

// OnHandMovement moves on_hand by delta (either sign) for a manual adjustment or a stocktake.
// It returns ok=false when delta is zero: there is nothing to record.
func OnHandMovement(sku string, t ChangeType, delta int64) (Movement, bool, error) {
	if delta == 0 {
		return Movement{}, false, nil
	}
	mag := delta
	if mag < 0 {
		mag = -mag
	}
	n, err := NewQty(mag)
	if err != nil {
		return Movement{}, false, err
	}
	return Movement{SKU: sku, Type: t, Qty: n, Delta: Quantities{OnHand: delta}}, true, nil
}

// Line is one SKU and quantity of an order.
type Line struct {
	SKU string
	Qty Qty
}

// MaxLines bounds the lines of one order.
const MaxLines = 100

// ParseLines validates an order's lines as they arrive (a SKU and a bare quantity each) and
// normalizes them (NormalizeLines): ErrBadOrder, ErrBadSKU or ErrBadQuantity when stock cannot
// take them at all.
func ParseLines(raw []events.Line) ([]Line, error) {
	lines := make([]Line, len(raw))
	for i, l := range raw {
		n, err := NewQty(l.Qty)
		if err != nil {
			return nil, fmt.Errorf("line %d (%s): %w", i, l.SKU, err)
		}
		lines[i] = Line{SKU: l.SKU, Qty: n}
	}
	return NormalizeLines(lines)
}

// NormalizeLines validates lines, merges repeated SKUs and sorts them by SKU: the fixed order
// in which rows are taken, so two orders can never deadlock each other.
func NormalizeLines(lines []Line) ([]Line, error) {
	if len(lines) == 0 || len(lines) > MaxLines {
		return nil, fmt.Errorf("%w: an order has 1 to %d lines, got %d", ErrBadOrder, MaxLines, len(lines))
	}
	bySKU := make(map[string]Qty, len(lines))
	for _, l := range lines {
		if err := ValidSKU(l.SKU); err != nil {
			return nil, err
		}
		if l.Qty.n == 0 {
			return nil, ErrBadQuantity
		}
		q, seen := bySKU[l.SKU]
		if !seen {
			bySKU[l.SKU] = l.Qty
			continue
		}
		sum, err := q.Add(l.Qty)
		if err != nil {
			return nil, err
		}
		bySKU[l.SKU] = sum
	}
	out := make([]Line, 0, len(bySKU))
	for sku, q := range bySKU {
		out = append(out, Line{SKU: sku, Qty: q})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SKU < out[j].SKU })
	return out, nil
}

// LedgerEntry is one stored ledger row.
type LedgerEntry struct {
	ID             int64
	SKU            string
	Slot           int // the row of the SKU it moved; the before/after figures are that slot's
	Type           ChangeType
	Qty            int64
	Before, After  Quantities
	OrderID        string
	Operator       string
	Remark         string
	IdempotencyKey string
	CreatedAt      time.Time
}

// SKUStock is the summary of a SKU: the sums over its slots.
type SKUStock struct {
	SKU string
	Quantities
	Slots     int // how many slots take new locks (1: the SKU is one row)
	UpdatedAt time.Time
}

// MaxSlots bounds the slots of a SKU.
const MaxSlots = 64

// ErrBadSlots is returned for a slot count outside 1..MaxSlots.
var ErrBadSlots = errors.New("slots must be between 1 and 64")

// AdjustmentState is the closed set of states of an adjustment order (AdjustmentStates;
// ParseAdjustmentState).
type AdjustmentState string

// Adjustment states: pending until a second operator approves or rejects it.
const (
	AdjustmentPending  AdjustmentState = "pending"
	AdjustmentApproved AdjustmentState = "approved"
	AdjustmentRejected AdjustmentState = "rejected"
)

// LedgerPoint is a point in a SKU's ledger: the last row written (0: none yet) and the SKU's
// book on_hand (the sum over its slots) right after it.
type LedgerPoint struct {
	LedgerID int64
	OnHand   int64
}

// Adjustment is an operator's request to change on_hand: a signed Delta (manual_adjust) or a
// Counted figure (stocktake). Stock moves only when a different operator approves it.
//
// A count is taken at a point in the ledger (CountedAt, recorded when the stocktake is filed):
// it corrects the book as it stood then, so the movements made between the count and the
// approval (a shipment, a receipt) are kept, not overwritten.
type Adjustment struct {
	ID          int64
	SKU         string
	Kind        ChangeType
	Delta       *int64
	Counted     *int64
	CountedAt   *LedgerPoint // stocktake only; nil for one filed before counts recorded it
	Reason      string
	RequestedBy string
	State       AdjustmentState
	DecidedBy   string
	LedgerID    *int64
	CreatedAt   time.Time
}

// NewAdjustment validates an adjustment request.
func NewAdjustment(sku string, kind ChangeType, delta, counted *int64, reason, by string) (Adjustment, error) {
	if err := ValidSKU(sku); err != nil {
		return Adjustment{}, err
	}
	bad := func(msg string) (Adjustment, error) { return Adjustment{}, fmt.Errorf("%w: %s", ErrBadAdjustment, msg) }
	switch kind {
	case ChangeManualAdjust:
		if delta == nil || counted != nil || *delta == 0 || *delta > MaxQty || *delta < -MaxQty {
			return bad("manual_adjust needs a non-zero delta within ±1000000000 and no counted")
		}
	case ChangeStocktake:
		if counted == nil || delta != nil || *counted < 0 || *counted > 1_000_000_000_000 {
			return bad("stocktake needs counted >= 0 and no delta")
		}
	default:
		return bad("kind must be manual_adjust or stocktake")
	}
	if reason == "" || len(reason) > 500 || !ValidText(reason) {
		return bad("reason is required (at most 500 bytes of UTF-8, no NUL)")
	}
	if by == "" {
		return bad("operator is required")
	}
	return Adjustment{SKU: sku, Kind: kind, Delta: delta, Counted: counted, Reason: reason, RequestedBy: by, State: AdjustmentPending}, nil
}

// CountAt records the point in the ledger a stocktake's count is taken at. It refuses a count
// that differs from the book there by more than MaxQty: no movement could carry it, so its
// approval could only fail.
func (a *Adjustment) CountAt(p LedgerPoint) error {
	if d := *a.Counted - p.OnHand; d > MaxQty || d < -MaxQty {
		return fmt.Errorf("%w: counted %d differs from the book's on_hand %d by more than %d, the most one stocktake moves",
			ErrBadAdjustment, *a.Counted, p.OnHand, MaxQty)
	}
	a.CountedAt = &p
	return nil
}

// Decide checks that by may decide a pending adjustment.
func (a Adjustment) Decide(by string) error {
	if a.State != AdjustmentPending {
		return fmt.Errorf("%w: adjustment %d is %s", ErrAdjustmentDecided, a.ID, a.State)
	}
	if by == "" {
		return fmt.Errorf("%w: operator is required", ErrBadAdjustment)
	}
	if by == a.RequestedBy {
		return ErrSelfApproval
	}
	return nil
}

// Movement returns the movement an approved adjustment makes given the SKU's current figures;
// ok=false when a stocktake matches the book figure at its count and nothing moves.
//
// A stocktake moves on_hand by Counted minus the book on_hand at CountedAt: the difference the
// count found, carried onto the figures as they are now. It returns ErrStocktakeConflict, and
// no movement, when that would leave on_hand below what is locked and sold now (the count and
// the movements since cannot both be right: count again), or when the stocktake has no
// CountedAt (filed by an older version: count again).
func (a Adjustment) Movement(current Quantities) (Movement, bool, error) {
	delta := int64(0)
	if a.Kind == ChangeStocktake {
		if a.CountedAt == nil {
			return Movement{}, false, fmt.Errorf("%w: adjustment %d has no ledger point for its count; count again", ErrStocktakeConflict, a.ID)
		}
		delta = *a.Counted - a.CountedAt.OnHand
		if after := current.Plus(Quantities{OnHand: delta}); !after.Valid() {
			return Movement{}, false, fmt.Errorf("%w: adjustment %d counted %d against a book of %d (ledger row %d); applied to on_hand %d that leaves %d for %d locked and %d sold; count again",
				ErrStocktakeConflict, a.ID, *a.Counted, a.CountedAt.OnHand, a.CountedAt.LedgerID, current.OnHand, after.OnHand, current.Locked, current.Sold)
		}
	} else {
		delta = *a.Delta
	}
	m, ok, err := OnHandMovement(a.SKU, a.Kind, delta)
	m.Remark = a.Reason
	if a.Kind == ChangeStocktake {
		// The row then explains itself: its before/after are now's, its delta the count's.
		m.Remark += fmt.Sprintf(" (counted %d against a book of %d at ledger row %d)", *a.Counted, a.CountedAt.OnHand, a.CountedAt.LedgerID)
	}
	return m, ok, err
}

// ValidText reports whether s is text the stores can hold: valid UTF-8 with no NUL byte
// (PostgreSQL's text refuses NUL, and one refused row would fail the batch it is in).
func ValidText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// MovementError says for which SKU a movement could not be made; Err is ErrUnknownSKU or
// ErrInsufficientStock.
type MovementError struct {
	SKU  string
	Type ChangeType
	Qty  int64
	Err  error
}

func (e *MovementError) Error() string {
	return fmt.Sprintf("%s %d of %s: %v", e.Type, e.Qty, e.SKU, e.Err)
}

func (e *MovementError) Unwrap() error { return e.Err }
