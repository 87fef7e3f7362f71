package stock

import (
	"errors"
	"fmt"
)

// MaxQty bounds a single movement, so sums of movements stay far from int64 overflow.
const MaxQty = 1_000_000_000

// ErrBadQuantity is returned for a quantity that is zero, negative or above MaxQty.
var ErrBadQuantity = errors.New("quantity must be between 1 and 1000000000")

// Qty is a positive number of units moved by one transition. The zero value is invalid: build
// one with NewQty.
type Qty struct{ n int64 }

// NewQty returns n as a Qty, or ErrBadQuantity.
func NewQty(n int64) (Qty, error) {
	if n <= 0 || n > MaxQty {
		return Qty{}, fmt.Errorf("%w: got %d", ErrBadQuantity, n)
	}
	return Qty{n}, nil
}

// MustQty is NewQty for constants in tests and tables; it panics on a bad quantity.
func MustQty(n int64) Qty {
	q, err := NewQty(n)
	if err != nil {
		panic(err)
	}
	return q
}

// Int64 returns the number of units.
func (q Qty) Int64() int64 { return q.n }

// Add returns q+o, or ErrBadQuantity when the sum leaves the allowed range.
func (q Qty) Add(o Qty) (Qty, error) { return NewQty(q.n + o.n) }

// Quantities are the figures of one SKU. Available is derived, never stored apart from the
// others: on_hand - locked - sold.
type Quantities struct {
	OnHand   int64
	Locked   int64
	Sold     int64
	Incoming int64
}

// Available is what a buyer can still take.
func (q Quantities) Available() int64 { return q.OnHand - q.Locked - q.Sold }

// Valid reports whether every figure, available included, is non-negative.
func (q Quantities) Valid() bool {
	return q.OnHand >= 0 && q.Locked >= 0 && q.Sold >= 0 && q.Incoming >= 0 && q.Available() >= 0
}

// Plus returns q moved by d.
func (q Quantities) Plus(d Quantities) Quantities {
	return Quantities{OnHand: q.OnHand + d.OnHand, Locked: q.Locked + d.Locked, Sold: q.Sold + d.Sold, Incoming: q.Incoming + d.Incoming}
}

// Minus returns q - d.
func (q Quantities) Minus(d Quantities) Quantities {
	return Quantities{OnHand: q.OnHand - d.OnHand, Locked: q.Locked - d.Locked, Sold: q.Sold - d.Sold, Incoming: q.Incoming - d.Incoming}
}
