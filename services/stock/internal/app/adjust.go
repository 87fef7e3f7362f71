package app

import (
	"context"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// RequestAdjustment files an adjustment order (manual_adjust or stocktake); stock does not
// move until another operator approves it. A stocktake's count is taken at the ledger's point
// now: the SKU's last ledger row and its book on_hand, recorded with it.
func (s *Service) RequestAdjustment(ctx context.Context, a stock.Adjustment) (stock.Adjustment, error) {
	err := s.store.InTx(ctx, func(tx Tx) error {
		var err error
		a, err = tx.RequestAdjustment(ctx, a)
		return err
	})
	return a, err
}

// DecideAdjustment approves (applying its movement) or rejects a pending adjustment. An
// approved stocktake moves on_hand by what the count found against the book at its point, so
// the movements since the count are kept; when that cannot fit the stock as it is now it
// returns ErrStocktakeConflict and changes nothing.
func (s *Service) DecideAdjustment(ctx context.Context, id int64, approve bool, by string) (stock.Adjustment, error) {
	var a stock.Adjustment
	err := s.store.InTx(ctx, func(tx Tx) error {
		var err error
		a, err = tx.DecideAdjustment(ctx, id, approve, by)
		return err
	})
	return a, err
}
