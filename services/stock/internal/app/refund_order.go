package app

import (
	"context"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// RefundOrder restocks a refunded order — unshipped units back to available, returned goods
// back to on_hand — and emits stock.restocked. A second refund is a reported no-op.
func (s *Service) RefundOrder(ctx context.Context, in *inbox.Message, orderID, operator string) (Resolution, error) {
	return s.resolve(ctx, resolveCall{in: in, orderID: orderID, operator: operator, kind: stepRefund, step: (*stock.Lock).Refund,
		settle: emitWhenApplied(events.StockRestocked{OrderID: orderID})})
}
