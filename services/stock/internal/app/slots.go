package app

import (
	"context"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// SetSlots splits a SKU into n slots — rows that lock independently, so concurrent batches on
// a hot SKU do not queue on one row — and spreads its available units evenly over them with
// rebalance ledger rows. It can be changed at any time, in both directions.
func (s *Service) SetSlots(ctx context.Context, sku string, n int, operator string) (stock.SKUStock, []stock.LedgerEntry, error) {
	return s.slotChange(ctx, sku, func(tx Tx) ([]stock.LedgerEntry, error) { return tx.SetSlots(ctx, sku, n, operator) })
}

// Rebalance spreads a SKU's available units evenly over its slots again (after purchases land
// in slot 0, or releases leave a slot fuller than the others).
func (s *Service) Rebalance(ctx context.Context, sku, operator string) (stock.SKUStock, []stock.LedgerEntry, error) {
	return s.slotChange(ctx, sku, func(tx Tx) ([]stock.LedgerEntry, error) { return tx.Rebalance(ctx, sku, operator) })
}

func (s *Service) slotChange(ctx context.Context, sku string, fn func(Tx) ([]stock.LedgerEntry, error)) (stock.SKUStock, []stock.LedgerEntry, error) {
	if err := stock.ValidSKU(sku); err != nil {
		return stock.SKUStock{}, nil, err
	}
	var entries []stock.LedgerEntry
	err := s.store.InTx(ctx, func(tx Tx) error {
		var err error
		entries, err = fn(tx)
		return err
	})
	if err != nil {
		return stock.SKUStock{}, nil, err
	}
	st, err := s.store.GetSKU(ctx, sku)
	return st, entries, err
}
