package app

import (
	"context"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// ExpectPurchase records units on a purchase order: incoming rises, nothing is sellable yet.
func (s *Service) ExpectPurchase(ctx context.Context, sku string, n stock.Qty, key, operator, remark string) (stock.LedgerEntry, bool, error) {
	m := stock.PurchaseExpectedMovement(sku, n)
	m.Remark = remark
	return s.move(ctx, m, key, operator)
}

// ReceivePurchase receives units of a purchase: incoming - n, on_hand + n. It returns an
// ErrInsufficientStock movement error when fewer than n units are incoming. The units arrive
// in slot 0 and, on a SKU with several slots, are spread over them in the same transaction.
func (s *Service) ReceivePurchase(ctx context.Context, sku string, n stock.Qty, key, operator, remark string) (stock.LedgerEntry, bool, error) {
	m := stock.PurchaseInboundMovement(sku, n)
	m.Remark = remark
	return s.move(ctx, m, key, operator)
}

func (s *Service) move(ctx context.Context, m stock.Movement, key, operator string) (e stock.LedgerEntry, dup bool, err error) {
	if err := stock.ValidSKU(m.SKU); err != nil {
		return e, false, err
	}
	err = s.store.InTx(ctx, func(tx Tx) error {
		if e, dup, err = tx.Move(ctx, m, operator, key); err != nil || dup || m.Type != stock.ChangePurchaseInbound {
			return err
		}
		_, err = tx.Rebalance(ctx, m.SKU, operator)
		return err
	})
	return e, dup, err
}
