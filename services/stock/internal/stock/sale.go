package stock

import "errors"

// Sell failure reasons carried by stock.sell_failed.
const (
	SellFailedInsufficient = "insufficient_stock" // released, and the stock is gone
	SellFailedNoLock       = "no_lock"            // the order was rejected: it never held stock
	SellFailedAlreadyPaid  = "already_paid"       // another payment sold the order first
)

// Sale is the answer to "what does a payment do to an order". Its zero value is the same
// payment again: nothing to do.
type Sale struct {
	Sold     bool   // the order's locks are sold now: stock.sold
	Relocked bool   // some had been released (a late payment) and were taken again from available
	Failed   string // the sale cannot be made: stock.sell_failed with this reason, so the payment is refunded
}

// DecideSale answers what payment paymentID does to an order, from what selling the order's
// locks (Lock.Sell on each, all or none) gave:
//
//   - nil: sold now (relocked: some locks had been released and were taken again);
//   - ErrInsufficientStock: released, and the stock is gone: failed, insufficient_stock;
//   - ErrNoLock: the order was rejected and never held stock: failed, no_lock;
//   - ErrAlreadyResolved: sold before, by paidBy: the same payment again is nothing to do,
//     another payment fails with already_paid.
//
// Any other error is returned, ErrOrderUnknown first of all (stock has not seen the order
// yet, or its locks were being taken): the payment is to be retried.
func DecideSale(sellErr error, relocked bool, paidBy, paymentID string) (Sale, error) {
	switch {
	case sellErr == nil:
		return Sale{Sold: true, Relocked: relocked}, nil
	case errors.Is(sellErr, ErrOrderUnknown):
		return Sale{}, sellErr
	case errors.Is(sellErr, ErrInsufficientStock):
		return Sale{Failed: SellFailedInsufficient}, nil
	case errors.Is(sellErr, ErrNoLock):
		return Sale{Failed: SellFailedNoLock}, nil
	case errors.Is(sellErr, ErrAlreadyResolved) && paidBy == paymentID:
		return Sale{}, nil
	case errors.Is(sellErr, ErrAlreadyResolved):
		return Sale{Failed: SellFailedAlreadyPaid}, nil
	default:
		return Sale{}, sellErr
	}
}
