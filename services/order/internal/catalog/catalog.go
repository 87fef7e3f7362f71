// Package catalog is the order service's price list: the sales terms of each SKU — what one
// unit costs, in which currency, and, for a promotion, its own payment window. Orders are
// priced from it, never from the buyer's request (docs/decisions/0004-prices-in-order.md);
// stock owns quantities only. It is pure Go: it imports no database or HTTP code.
package catalog

import (
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// MaxOperatorLen bounds who changed a price.
const MaxOperatorLen = 128

// Validation errors of New; each is wrapped with the offending value.
var (
	ErrInvalidSKU      = errors.New("invalid sku")
	ErrInvalidPrice    = errors.New("invalid unit_price")
	ErrInvalidCurrency = errors.New("invalid currency")
	ErrInvalidWindow   = errors.New("invalid payment_window")
	ErrInvalidOperator = errors.New("invalid updated_by")
)

// ErrNotFound is returned by repositories for a SKU that has no price: it is not for sale.
var ErrNotFound = errors.New("no price for sku")

var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)

// ValidCurrency reports whether s is a currency code New accepts: three upper-case letters.
func ValidCurrency(s string) bool { return currencyPattern.MatchString(s) }

// Price is one SKU's sales terms. Build one with New (a change an operator asks for) or
// Restore (one read back from storage).
type Price struct {
	sku       string
	unitPrice order.Money
	currency  string
	window    time.Duration // 0: the service's default payment window
	updatedAt time.Time
	updatedBy string
}

// New returns the terms an operator (updatedBy) sets for sku at at. It returns a wrapped
// ErrInvalidSKU (the contract's SKU syntax, events.ValidSKU), ErrInvalidPrice unless
// unitPrice is positive (a free SKU could never be paid: providers refuse zero amounts),
// ErrInvalidCurrency unless currency is three upper-case letters, ErrInvalidWindow unless
// window is 0 (none of its own) or minWindow..order.MaxPaymentTimeout, or ErrInvalidOperator.
func New(sku string, unitPrice int64, currency string, window, minWindow time.Duration, at time.Time, updatedBy string) (Price, error) {
	if !events.ValidSKU(sku) {
		return Price{}, fmt.Errorf("%w: %q must be 1-64 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit", ErrInvalidSKU, sku)
	}
	if unitPrice <= 0 {
		return Price{}, fmt.Errorf("%w: %d must be a positive number of minor units", ErrInvalidPrice, unitPrice)
	}
	if !currencyPattern.MatchString(currency) {
		return Price{}, fmt.Errorf("%w: %q is not three upper-case letters (ISO 4217)", ErrInvalidCurrency, currency)
	}
	minWindow = max(minWindow, order.MinPaymentTimeout)
	if window != 0 && (window < minWindow || window > order.MaxPaymentTimeout) {
		return Price{}, fmt.Errorf("%w: %s is not between %s and %s", ErrInvalidWindow, window, minWindow, order.MaxPaymentTimeout)
	}
	if updatedBy == "" || len(updatedBy) > MaxOperatorLen || !utf8.ValidString(updatedBy) {
		return Price{}, fmt.Errorf("%w: must be 1-%d bytes of UTF-8", ErrInvalidOperator, MaxOperatorLen)
	}
	return Price{sku: sku, unitPrice: order.Money(unitPrice), currency: currency, window: window,
		updatedAt: at.UTC(), updatedBy: updatedBy}, nil
}

// Restore rebuilds a stored price. It checks what New checks except the lower bound of the
// window, which is a setting and may have changed since.
func Restore(sku string, unitPrice int64, currency string, window time.Duration, updatedAt time.Time, updatedBy string) (Price, error) {
	p, err := New(sku, unitPrice, currency, window, 0, updatedAt, updatedBy)
	if err != nil {
		return Price{}, fmt.Errorf("restore price of %s: %w", sku, err)
	}
	return p, nil
}

// SKU returns the SKU the terms are for.
func (p Price) SKU() string { return p.sku }

// UnitPrice returns the price of one unit, in minor units of Currency.
func (p Price) UnitPrice() order.Money { return p.unitPrice }

// Currency returns the ISO 4217 code of the price.
func (p Price) Currency() string { return p.currency }

// PaymentWindow returns the SKU's own payment window, or 0 when it has none.
func (p Price) PaymentWindow() time.Duration { return p.window }

// UpdatedAt returns when the terms were last set.
func (p Price) UpdatedAt() time.Time { return p.updatedAt }

// UpdatedBy returns who last set them.
func (p Price) UpdatedBy() string { return p.updatedBy }
