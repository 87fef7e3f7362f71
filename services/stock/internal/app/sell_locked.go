package app

import (
	"context"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// SellLocked turns an order's locks into sold after its payment. Locks already released (a
// late payment) are taken again from available when stock allows — otherwise the error wraps
// ErrInsufficientStock and nothing changes. ErrNoLock when the order never held stock.
func (s *Service) SellLocked(ctx context.Context, orderID, operator string) (Resolution, error) {
	return s.resolveInTx(ctx, orderID, operator, (*stock.Lock).Sell)
}
