package app

import (
	"context"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// RefundOrder restocks a refunded order: unshipped units back to available, returned goods
// back to on_hand. A second refund is a reported no-op.
func (s *Service) RefundOrder(ctx context.Context, orderID, operator string) (Resolution, error) {
	return s.resolveInTx(ctx, orderID, operator, (*stock.Lock).Refund)
}
