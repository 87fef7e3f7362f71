// Package order is the order domain: an order's lines, total and status, and the state machine
// that moves it — by the buyer's or an operator's requests (cancel, refund, ship) and by the
// outcomes other services report (stock locked, sold, released…). It is pure Go: it imports
// no database, messaging or HTTP code, and it decides; callers persist and publish.
//
// Every transition method returns ErrInvalidTransition (wrapped, naming the current status)
// when the order's status does not allow it, and reports whether it changed the order, so a
// repeated request or a redelivered outcome is a no-op rather than a second effect.
package order

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stockflow/stockflow/pkg/events"
)

// Limits of an order.
const (
	MaxItems          = 100
	MaxBuyerIDLen     = 128
	MaxReasonLen      = 500
	MinPaymentTimeout = time.Second
	MaxPaymentTimeout = 24 * time.Hour
)

// Validation errors of New and NewItem; each is wrapped with the offending value.
var (
	ErrInvalidID       = errors.New("invalid order id")
	ErrInvalidBuyer    = errors.New("invalid buyer_id")
	ErrInvalidItems    = errors.New("invalid items")
	ErrInvalidSKU      = errors.New("invalid sku")
	ErrInvalidQty      = errors.New("invalid qty")
	ErrInvalidPrice    = errors.New("invalid unit_price")
	ErrDuplicateSKU    = errors.New("duplicate sku")
	ErrTotalOverflow   = errors.New("order total overflows")
	ErrInvalidCurrency = errors.New("invalid currency")
	ErrInvalidTimeout  = errors.New("invalid payment_timeout")
	ErrInvalidReason   = errors.New("invalid reason")
)

// ErrNotFound is returned by repositories for an order id they do not hold.
var ErrNotFound = errors.New("order not found")

// ErrInvalidTransition is returned by a transition the order's current status does not allow.
var ErrInvalidTransition = errors.New("invalid transition")

var (
	idPattern       = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
)

// Item is one line of an order: a SKU, its quantity and its unit price.
type Item struct {
	sku       string
	qty       Qty
	unitPrice Money
}

// NewItem returns a validated line: ErrInvalidSKU unless sku is 1..64 characters of
// [A-Za-z0-9._:-] starting with a letter or digit, ErrInvalidQty unless qty is 1..MaxQty,
// ErrInvalidPrice when unitPrice is negative.
func NewItem(sku string, qty, unitPrice int64) (Item, error) {
	if !events.ValidSKU(sku) { // the contract's syntax: refused here, at the door, not in stock
		return Item{}, fmt.Errorf("%w: %q must be 1-64 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit", ErrInvalidSKU, sku)
	}
	q, err := NewQty(qty)
	if err != nil {
		return Item{}, fmt.Errorf("sku %s: %w", sku, err)
	}
	p, err := NewPrice(unitPrice)
	if err != nil {
		return Item{}, fmt.Errorf("sku %s: %w", sku, err)
	}
	return Item{sku: sku, qty: q, unitPrice: p}, nil
}

// SKU returns the line's SKU.
func (i Item) SKU() string { return i.sku }

// Qty returns the line's quantity.
func (i Item) Qty() Qty { return i.qty }

// UnitPrice returns the price of one unit.
func (i Item) UnitPrice() Money { return i.unitPrice }

// HistoryEntry is one step of an order's history: the status it had after the step, when,
// and why. Steps that only note an outcome (stock restocked, a failed payment attempt) keep
// the status the order already had.
type HistoryEntry struct {
	Status Status
	At     time.Time
	Reason string
}

// Order is one buyer's order. Its fields are unexported: it is built by New (a new order) or
// Restore (one read back from storage) and changed only by its transition methods.
type Order struct {
	id                string
	buyerID           string
	items             []Item
	total             Money
	currency          string
	paymentTimeout    time.Duration
	status            Status
	createdAt         time.Time
	expiresAt         time.Time
	updatedAt         time.Time
	cancelRequestedAt time.Time
	history           []HistoryEntry
}

// New returns a pending order created at now, whose payment is due now+paymentTimeout. It
// returns a wrapped validation error: ErrInvalidID, ErrInvalidBuyer (empty, over
// MaxBuyerIDLen bytes, or with control characters), ErrInvalidItems (not 1..MaxItems lines),
// ErrDuplicateSKU (two lines of one SKU: the buyer must say which price and quantity they
// mean, so lines are never merged), ErrTotalOverflow, ErrInvalidCurrency (not three
// upper-case letters) or ErrInvalidTimeout (not MinPaymentTimeout..MaxPaymentTimeout).
func New(id, buyerID string, items []Item, currency string, paymentTimeout time.Duration, now time.Time) (*Order, error) {
	if !idPattern.MatchString(id) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	if err := validBuyer(buyerID); err != nil {
		return nil, err
	}
	total, err := validItems(items)
	if err != nil {
		return nil, err
	}
	if !currencyPattern.MatchString(currency) {
		return nil, fmt.Errorf("%w: %q is not three upper-case letters (ISO 4217)", ErrInvalidCurrency, currency)
	}
	if paymentTimeout < MinPaymentTimeout || paymentTimeout > MaxPaymentTimeout {
		return nil, fmt.Errorf("%w: %s is not between %s and %s", ErrInvalidTimeout, paymentTimeout, MinPaymentTimeout, MaxPaymentTimeout)
	}
	now = now.UTC()
	o := &Order{
		id:             id,
		buyerID:        buyerID,
		items:          append([]Item(nil), items...),
		total:          total,
		currency:       currency,
		paymentTimeout: paymentTimeout,
		status:         Pending,
		createdAt:      now,
		expiresAt:      now.Add(paymentTimeout),
		updatedAt:      now,
	}
	o.history = []HistoryEntry{{Status: Pending, At: now, Reason: "order placed"}}
	return o, nil
}

// CheckBuyer returns the error New returns for buyerID (ErrInvalidBuyer, wrapped), or nil:
// callers that key anything by buyer check it first.
func CheckBuyer(buyerID string) error { return validBuyer(buyerID) }

func validBuyer(buyerID string) error {
	if buyerID == "" || len(buyerID) > MaxBuyerIDLen || !utf8.ValidString(buyerID) {
		return fmt.Errorf("%w: must be 1-%d bytes of UTF-8", ErrInvalidBuyer, MaxBuyerIDLen)
	}
	for _, r := range buyerID {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: contains a control character", ErrInvalidBuyer)
		}
	}
	return nil
}

func validItems(items []Item) (Money, error) {
	if len(items) < 1 || len(items) > MaxItems {
		return 0, fmt.Errorf("%w: an order has 1 to %d lines, got %d", ErrInvalidItems, MaxItems, len(items))
	}
	seen := make(map[string]bool, len(items))
	var total Money
	for _, it := range items {
		if it.sku == "" {
			return 0, fmt.Errorf("%w: line built without NewItem", ErrInvalidItems)
		}
		if seen[it.sku] {
			return 0, fmt.Errorf("%w: %s appears on more than one line", ErrDuplicateSKU, it.sku)
		}
		seen[it.sku] = true
		line, err := it.unitPrice.Times(it.qty)
		if err != nil {
			return 0, err
		}
		if total, err = total.Plus(line); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// ID returns the order id.
func (o *Order) ID() string { return o.id }

// BuyerID returns who placed the order.
func (o *Order) BuyerID() string { return o.buyerID }

// Items returns a copy of the order's lines, in the order they were placed.
func (o *Order) Items() []Item { return append([]Item(nil), o.items...) }

// Total returns the sum of qty × unit_price over the lines.
func (o *Order) Total() Money { return o.total }

// Currency returns the ISO 4217 code the prices are in.
func (o *Order) Currency() string { return o.currency }

// PaymentTimeout returns how long the buyer had to pay.
func (o *Order) PaymentTimeout() time.Duration { return o.paymentTimeout }

// Status returns the current status.
func (o *Order) Status() Status { return o.status }

// CreatedAt returns when the order was placed.
func (o *Order) CreatedAt() time.Time { return o.createdAt }

// ExpiresAt returns the payment deadline: CreatedAt + PaymentTimeout.
func (o *Order) ExpiresAt() time.Time { return o.expiresAt }

// UpdatedAt returns when the order last changed.
func (o *Order) UpdatedAt() time.Time { return o.updatedAt }

// CancelRequestedAt returns when a cancel was requested, or the zero time if never.
func (o *Order) CancelRequestedAt() time.Time { return o.cancelRequestedAt }

// History returns a copy of the order's history, oldest first.
func (o *Order) History() []HistoryEntry { return append([]HistoryEntry(nil), o.history...) }

// Snapshot is an order's state in plain fields, for storage. Restore turns one back into an
// Order.
type Snapshot struct {
	ID                string
	BuyerID           string
	Items             []ItemSnapshot
	Total             int64
	Currency          string
	PaymentTimeout    time.Duration
	Status            string
	CreatedAt         time.Time
	ExpiresAt         time.Time
	UpdatedAt         time.Time
	CancelRequestedAt time.Time // zero: never requested
	History           []HistoryEntry
}

// ItemSnapshot is one line in plain fields.
type ItemSnapshot struct {
	SKU       string
	Qty       int64
	UnitPrice int64
}

// Snapshot returns o's state in plain fields.
func (o *Order) Snapshot() Snapshot {
	items := make([]ItemSnapshot, len(o.items))
	for i, it := range o.items {
		items[i] = ItemSnapshot{SKU: it.sku, Qty: it.qty.Int64(), UnitPrice: it.unitPrice.Int64()}
	}
	return Snapshot{
		ID: o.id, BuyerID: o.buyerID, Items: items, Total: o.total.Int64(), Currency: o.currency,
		PaymentTimeout: o.paymentTimeout, Status: o.status.String(),
		CreatedAt: o.createdAt, ExpiresAt: o.expiresAt, UpdatedAt: o.updatedAt,
		CancelRequestedAt: o.cancelRequestedAt, History: o.History(),
	}
}

// Restore rebuilds an order from a snapshot of one that New created. It checks the same
// rules as New (but not the payment timeout bounds, which may have changed since) and that
// the stored total matches the lines, so corrupted storage is reported, not trusted.
func Restore(s Snapshot) (*Order, error) {
	if !idPattern.MatchString(s.ID) {
		return nil, fmt.Errorf("restore order: %w: %q", ErrInvalidID, s.ID)
	}
	if err := validBuyer(s.BuyerID); err != nil {
		return nil, fmt.Errorf("restore order %s: %w", s.ID, err)
	}
	items := make([]Item, len(s.Items))
	for i, it := range s.Items {
		var err error
		if items[i], err = NewItem(it.SKU, it.Qty, it.UnitPrice); err != nil {
			return nil, fmt.Errorf("restore order %s: %w", s.ID, err)
		}
	}
	total, err := validItems(items)
	if err != nil {
		return nil, fmt.Errorf("restore order %s: %w", s.ID, err)
	}
	if total.Int64() != s.Total {
		return nil, fmt.Errorf("restore order %s: stored total %d, lines sum to %d", s.ID, s.Total, total)
	}
	status, err := ParseStatus(s.Status)
	if err != nil {
		return nil, fmt.Errorf("restore order %s: %w", s.ID, err)
	}
	return &Order{
		id: s.ID, buyerID: s.BuyerID, items: items, total: total, currency: s.Currency,
		paymentTimeout: s.PaymentTimeout, status: status,
		createdAt: s.CreatedAt, expiresAt: s.ExpiresAt, updatedAt: s.UpdatedAt,
		cancelRequestedAt: s.CancelRequestedAt, history: append([]HistoryEntry(nil), s.History...),
	}, nil
}

// record appends a history entry at at, moving the order to status. Reasons reported by other
// services are clipped to MaxReasonLen bytes: history is for people, not a payload store.
func (o *Order) record(status Status, at time.Time, reason string) {
	reason = clip(reason, MaxReasonLen)
	at = at.UTC()
	o.status = status
	o.updatedAt = at
	o.history = append(o.history, HistoryEntry{Status: status, At: at, Reason: reason})
}

func (o *Order) refuse(action string) error {
	return fmt.Errorf("%w: cannot %s an order that is %s", ErrInvalidTransition, action, o.status)
}

// checkReason refuses a reason longer than MaxReasonLen, not UTF-8, or holding a NUL byte:
// PostgreSQL's text refuses NUL, and one refused history row fails the whole batch of updates
// it is written with.
func checkReason(reason string) error {
	if len(reason) > MaxReasonLen || !utf8.ValidString(reason) || strings.ContainsRune(reason, 0) {
		return fmt.Errorf("%w: at most %d bytes of UTF-8, with no NUL", ErrInvalidReason, MaxReasonLen)
	}
	return nil
}

func withReason(what, reason string) string {
	if reason == "" {
		return what
	}
	return what + ": " + reason
}

// clip shortens s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
