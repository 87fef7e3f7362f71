package app

import (
	"context"
	"time"

	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// LockForOrder locks every line of an order or none, until deadline. A rejection (not enough
// stock, unknown SKU) is an outcome, not an error; a replayed order returns its first outcome.
func (s *Service) LockForOrder(ctx context.Context, orderID string, lines []stock.Line, deadline time.Time, operator string) (postgres.LockResult, error) {
	lines, err := stock.NormalizeLines(lines)
	if err != nil {
		return postgres.LockResult{}, err
	}
	var res postgres.LockResult
	err = s.store.InTx(ctx, func(tx *postgres.Tx) error {
		res, err = tx.LockOrder(ctx, orderID, lines, deadline, operator)
		return err
	})
	return res, err
}
