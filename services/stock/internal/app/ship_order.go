package app

import (
	"context"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// ShipOrder takes a sold order's units out of sold and on_hand and emits stock.shipped.
// ErrLockNotHeld when the order is not sold; a second ship is a reported no-op.
func (s *Service) ShipOrder(ctx context.Context, in *Inbound, orderID, operator string) (Resolution, error) {
	var res Resolution
	dup, err := s.inTx(ctx, in, func(tx *postgres.Tx) ([]events.Event, error) {
		var err error
		res, err = resolve(ctx, tx, orderID, operator, func(l *stock.Lock) (stock.Movement, error) {
			if l.State() == stock.StateShipped || l.State() == stock.StateRefunded {
				return stock.Movement{}, stock.ErrAlreadyResolved
			}
			return l.Ship()
		})
		if err != nil || !res.Applied {
			return nil, err
		}
		return []events.Event{events.StockShipped{OrderID: orderID}}, nil
	})
	res.Duplicate = dup
	return res, err
}
