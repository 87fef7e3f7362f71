package app

import (
	"context"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// ShipOrder takes a sold order's units out of sold and on_hand. ErrLockNotHeld when the order
// is not sold; a second ship is a reported no-op.
func (s *Service) ShipOrder(ctx context.Context, orderID, operator string) (Resolution, error) {
	return s.resolveInTx(ctx, orderID, operator, func(l *stock.Lock) (stock.Movement, error) {
		if l.State() == stock.StateShipped || l.State() == stock.StateRefunded {
			return stock.Movement{}, stock.ErrAlreadyResolved
		}
		return l.Ship()
	})
}
