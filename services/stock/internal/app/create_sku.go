package app

import (
	"context"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// CreateSKU adds a SKU with its opening on_hand (recorded as a stocktake ledger row).
func (s *Service) CreateSKU(ctx context.Context, sku string, onHand int64, operator string) (stock.SKUStock, error) {
	if onHand < 0 || onHand > stock.MaxQty {
		return stock.SKUStock{}, stock.ErrBadQuantity
	}
	var out stock.SKUStock
	err := s.store.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = tx.CreateSKU(ctx, sku, onHand, operator)
		return err
	})
	return out, err
}
