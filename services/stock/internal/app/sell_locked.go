package app

import (
	"context"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// SellLocked turns an order's locks into sold after paymentID succeeded and emits stock.sold.
// Locks already released (a late payment) are taken again from available when stock allows.
// When the sale cannot be made — stock gone, order never locked, order already sold by another
// payment — the Resolution says Failed and stock.sell_failed is emitted so the payment is
// refunded (stock.DecideSale). The same payment again is a no-op. An order stock has not seen
// yet returns an error wrapping ErrOrderUnknown (retry later).
func (s *Service) SellLocked(ctx context.Context, in *inbox.Message, orderID, paymentID, operator string) (Resolution, error) {
	return s.resolve(ctx, resolveCall{in: in, orderID: orderID, operator: operator, step: (*stock.Lock).Sell, paymentID: paymentID, kind: stepSell,
		settle: func(ctx context.Context, tx Tx, res *Resolution, err error) ([]events.Event, error) {
			paidBy := ""
			if err == nil && !res.Applied { // the locks were past selling: by which payment?
				if paidBy, err = tx.PaidBy(ctx, orderID); err != nil {
					return nil, err
				}
				err = stock.ErrAlreadyResolved
			}
			sale, err := stock.DecideSale(err, res.Relocked, paidBy, paymentID)
			switch {
			case err != nil:
				return nil, err
			case sale.Failed != "":
				res.Failed = sale.Failed
				return []events.Event{events.StockSellFailed{OrderID: orderID, PaymentID: paymentID, Reason: sale.Failed}}, nil
			case sale.Sold:
				return []events.Event{events.StockSold{OrderID: orderID, Relocked: sale.Relocked}}, nil
			}
			return nil, nil
		}})
}
