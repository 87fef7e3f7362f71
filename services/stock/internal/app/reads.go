package app

import (
	"context"
	"time"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// GetSKU reads a SKU's summary (the sums over its slots); ErrUnknownSKU when there is none.
func (s *Service) GetSKU(ctx context.Context, sku string) (stock.SKUStock, error) {
	return s.store.GetSKU(ctx, sku)
}

// Ledger returns the rows of a SKU's ledger q picks, oldest first; ErrUnknownSKU when there
// is no such SKU.
func (s *Service) Ledger(ctx context.Context, sku string, q LedgerQuery) ([]stock.LedgerEntry, error) {
	return s.store.Ledger(ctx, sku, q)
}

// ListSKUs returns up to limit SKUs after after, in sku order, whose names start with prefix.
func (s *Service) ListSKUs(ctx context.Context, prefix, after string, limit int) ([]stock.SKUStock, error) {
	return s.store.ListSKUs(ctx, prefix, after, limit)
}

// Locks returns the lock rows of an order (none when it holds no lock).
func (s *Service) Locks(ctx context.Context, orderID string) ([]*stock.Lock, error) {
	return s.store.Locks(ctx, orderID)
}

// GetAdjustment reads an adjustment order; ErrAdjustmentNotFound when there is none.
func (s *Service) GetAdjustment(ctx context.Context, id int64) (stock.Adjustment, error) {
	return s.store.GetAdjustment(ctx, id)
}

// Adjustments lists the adjustment orders q picks, newest first.
func (s *Service) Adjustments(ctx context.Context, q AdjustmentQuery) ([]stock.Adjustment, error) {
	return s.store.Adjustments(ctx, q)
}

// OrderOutcome reads what stock knows of an order; ErrOrderUnknown when stock never saw it.
func (s *Service) OrderOutcome(ctx context.Context, orderID string) (stock.OrderOutcome, error) {
	return s.store.GetOrderOutcome(ctx, orderID)
}

// Verify compares every slot's summary with the fold of its ledger and with its lock rows, in
// one snapshot, and returns every difference; none means consistent. A slot oversold (sold +
// locked > on_hand, or available < 0) is a difference of Check CheckOversell, and each SKU
// with one is counted in stockflow.stock.oversell.
func (s *Service) Verify(ctx context.Context) ([]stock.Difference, error) {
	diffs, err := s.store.Verify(ctx)
	if err != nil {
		return nil, err
	}
	s.rec.differences(ctx, diffs)
	return diffs, nil
}

// Rebuild recomputes every slot's figures from the ledger (the ledger wins) and returns the
// SKUs it changed.
func (s *Service) Rebuild(ctx context.Context) ([]string, error) { return s.store.Rebuild(ctx) }

// OverdueLocks counts the locks still held whose deadline is before cutoff and returns the
// orders of up to limit of them, oldest deadline first.
func (s *Service) OverdueLocks(ctx context.Context, cutoff time.Time, limit int) (int, []string, error) {
	return s.store.OverdueLocks(ctx, cutoff, limit)
}

// HeldOrders counts the orders holding locks taken before cutoff and returns up to limit of
// them, oldest first.
func (s *Service) HeldOrders(ctx context.Context, cutoff time.Time, limit int) (int, []string, error) {
	return s.store.HeldOrders(ctx, cutoff, limit)
}

// CountSKUs returns how many SKUs there are.
func (s *Service) CountSKUs(ctx context.Context) (int, error) { return s.store.CountSKUs(ctx) }
