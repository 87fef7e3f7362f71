package app

import (
	"context"
	"errors"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Sell failure reasons carried by stock.sell_failed.
const (
	SellFailedInsufficient = "insufficient_stock" // released, and the stock is gone
	SellFailedNoLock       = "no_lock"            // the order was rejected: it never held stock
	SellFailedAlreadyPaid  = "already_paid"       // another payment sold the order first
)

// SellLocked turns an order's locks into sold after paymentID succeeded and emits stock.sold.
// Locks already released (a late payment) are taken again from available when stock allows.
// When the sale cannot be made — stock gone, order never locked, order already sold by another
// payment — the Resolution says Failed and stock.sell_failed is emitted so the payment is
// refunded. The same payment again is a no-op. An order stock has not seen yet returns an
// error wrapping ErrOrderUnknown (retry later).
func (s *Service) SellLocked(ctx context.Context, in *Inbound, orderID, paymentID, operator string) (Resolution, error) {
	return s.resolve(ctx, resolveCall{in: in, orderID: orderID, operator: operator, step: (*stock.Lock).Sell, paymentID: paymentID,
		settle: func(ctx context.Context, tx Tx, res *Resolution, err error) ([]events.Event, error) {
			failed := func(reason string) ([]events.Event, error) {
				res.Failed = reason
				return []events.Event{events.StockSellFailed{OrderID: orderID, PaymentID: paymentID, Reason: reason}}, nil
			}
			switch {
			case errors.Is(err, stock.ErrOrderUnknown):
				return nil, err
			case errors.Is(err, stock.ErrInsufficientStock):
				return failed(SellFailedInsufficient)
			case errors.Is(err, stock.ErrNoLock):
				return failed(SellFailedNoLock)
			case err != nil:
				return nil, err
			case !res.Applied:
				paidBy, err := tx.PaidBy(ctx, orderID)
				if err != nil {
					return nil, err
				}
				if paidBy != paymentID {
					return failed(SellFailedAlreadyPaid)
				}
				return nil, nil
			}
			return []events.Event{events.StockSold{OrderID: orderID, Relocked: res.Relocked}}, nil
		}})
}
