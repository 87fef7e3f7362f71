package app

import (
	"context"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// ShipOrder moves a paid order to shipped and emits order.shipped (stock takes the units out
// of sold and on_hand). It returns order.ErrInvalidTransition for any other status,
// order.ErrNotFound for an unknown id; a repeat emits nothing.
func (s *Service) ShipOrder(ctx context.Context, id string) (*order.Order, error) {
	return s.request(ctx, "ship", id,
		func(o *order.Order) (bool, error) { return o.Ship(s.now()) },
		func(o *order.Order) events.Event { return events.OrderShipped{OrderID: o.ID()} })
}
