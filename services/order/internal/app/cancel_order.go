package app

import (
	"context"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// CancelOrder asks stock to release an unpaid order (order.cancel_requested). The status
// stays pending or awaiting_payment until stock.released arrives: a payment may still win the
// race for the locks. It returns order.ErrInvalidTransition for a status that cannot be
// cancelled, order.ErrNotFound for an unknown id; a repeat emits nothing.
func (s *Service) CancelOrder(ctx context.Context, id, reason string) (*order.Order, error) {
	return s.request(ctx, "cancel", id,
		func(o *order.Order) (bool, error) { return o.RequestCancel(s.now(), reason) },
		func(o *order.Order) events.Event { return events.OrderCancelRequested{OrderID: o.ID(), Reason: reason} })
}
