package app

import (
	"context"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// ReleaseLock returns an order's held locks to available, for a timeout (reason
// ChangeReleaseTimeout) or a cancellation (ChangeReleaseCancel). Locks already sold or released
// make it a reported no-op.
func (s *Service) ReleaseLock(ctx context.Context, orderID string, reason stock.ChangeType, operator string) (Resolution, error) {
	return s.resolveInTx(ctx, orderID, operator, func(l *stock.Lock) (stock.Movement, error) { return l.Release(reason) })
}
