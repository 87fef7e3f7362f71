package app

import (
	"context"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// ShipOrder takes a sold order's units out of sold and on_hand and emits stock.shipped.
// ErrLockNotHeld when the order is not sold; a second ship is a reported no-op.
func (s *Service) ShipOrder(ctx context.Context, in *inbox.Message, orderID, operator string) (Resolution, error) {
	return s.resolve(ctx, resolveCall{in: in, orderID: orderID, operator: operator, kind: stepShip,
		step: func(l *stock.Lock) (stock.Movement, error) {
			if l.State() == stock.StateShipped || l.State() == stock.StateRefunded {
				return stock.Movement{}, stock.ErrAlreadyResolved
			}
			return l.Ship()
		},
		settle: emitWhenApplied(events.StockShipped{OrderID: orderID})})
}

// emitWhenApplied is the settle of a step that emits ev when it moved stock.
func emitWhenApplied(ev events.Event) func(context.Context, Tx, *Resolution, error) ([]events.Event, error) {
	return func(_ context.Context, _ Tx, res *Resolution, err error) ([]events.Event, error) {
		if err != nil || !res.Applied {
			return nil, err
		}
		return []events.Event{ev}, nil
	}
}
