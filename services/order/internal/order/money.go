package order

import (
	"fmt"
	"math"
)

// MaxQty is the most units of one SKU a single order line may ask for.
const MaxQty = 10_000

// Qty is a number of units on one order line, 1..MaxQty. Build one with NewQty.
type Qty int64

// NewQty returns n as a Qty, or ErrInvalidQty when n is outside 1..MaxQty.
func NewQty(n int64) (Qty, error) {
	if n < 1 || n > MaxQty {
		return 0, fmt.Errorf("%w: %d is not between 1 and %d", ErrInvalidQty, n, MaxQty)
	}
	return Qty(n), nil
}

// Int64 returns the number of units.
func (q Qty) Int64() int64 { return int64(q) }

// Money is an amount in integer minor units of the order's currency (fen, cents), never negative.
type Money int64

// NewPrice returns n as a unit price, or ErrInvalidPrice when it is negative.
func NewPrice(n int64) (Money, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: %d is negative", ErrInvalidPrice, n)
	}
	return Money(n), nil
}

// Int64 returns the amount in minor units.
func (m Money) Int64() int64 { return int64(m) }

// Times returns m×q, or ErrTotalOverflow when the product does not fit in an int64.
func (m Money) Times(q Qty) (Money, error) {
	if q != 0 && int64(m) > math.MaxInt64/int64(q) {
		return 0, fmt.Errorf("%w: %d × %d", ErrTotalOverflow, m, q)
	}
	return m * Money(q), nil
}

// Plus returns m+o, or ErrTotalOverflow when the sum does not fit in an int64.
func (m Money) Plus(o Money) (Money, error) {
	if int64(o) > math.MaxInt64-int64(m) {
		return 0, fmt.Errorf("%w: %d + %d", ErrTotalOverflow, m, o)
	}
	return m + o, nil
}
