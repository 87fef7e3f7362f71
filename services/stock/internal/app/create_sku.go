package app

import (
	"context"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// CreateSKU adds a SKU with its opening on_hand (recorded as a stocktake ledger row).
func (s *Service) CreateSKU(ctx context.Context, sku string, onHand int64, operator string) (stock.SKUStock, error) {
	if onHand < 0 || onHand > stock.MaxQty {
		return stock.SKUStock{}, stock.ErrBadQuantity
	}
	var out stock.SKUStock
	_, err := s.inTx(ctx, nil, func(tx *postgres.Tx) ([]events.Event, error) {
		var err error
		out, err = tx.CreateSKU(ctx, sku, onHand, operator)
		return nil, err
	})
	return out, err
}
