package app

import (
	"context"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// RefundOrder moves a paid or shipped order to refund_pending and emits
// order.refund_requested (stock restocks, payment-adapter pays back; payment.refunded then
// completes it). It returns order.ErrInvalidTransition for any other status, order.ErrNotFound
// for an unknown id; a repeat emits nothing.
func (s *Service) RefundOrder(ctx context.Context, id, reason string) (*order.Order, error) {
	return s.request(ctx, "refund", id,
		func(o *order.Order) (bool, error) { return o.RequestRefund(s.now(), reason) },
		func(o *order.Order) events.Event { return events.OrderRefundRequested{OrderID: o.ID(), Reason: reason} })
}
