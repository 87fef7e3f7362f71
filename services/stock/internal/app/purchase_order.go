package app

import (
	"context"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// PlacePurchaseOrder records a purchase order and raises incoming by its units in the same
// transaction, under the caller's idempotency key: a replay returns the first order with
// duplicate=true and moves nothing.
func (s *Service) PlacePurchaseOrder(ctx context.Context, p stock.PurchaseOrder, key string) (out stock.PurchaseOrder, dup bool, err error) {
	err = s.store.InTx(ctx, func(tx Tx) error {
		out, dup, err = tx.CreatePurchaseOrder(ctx, p, key)
		return err
	})
	return out, dup, err
}

// ReceivePurchaseOrder receives n units of a purchase order: incoming - n, on_hand + n,
// spread over the SKU's slots as ReceivePurchase does. It returns ErrOverReceipt when n is
// more than the order still expects and ErrPurchaseOrderNotOpen once it is received or
// closed, and changes nothing then; a replay of key returns the order with duplicate=true.
func (s *Service) ReceivePurchaseOrder(ctx context.Context, id int64, n stock.Qty, key, operator, remark string) (out stock.PurchaseOrder, dup bool, err error) {
	err = s.store.InTx(ctx, func(tx Tx) error {
		if out, dup, err = tx.ReceivePurchaseOrder(ctx, id, n, key, operator, remark); err != nil || dup {
			return err
		}
		_, err = tx.Rebalance(ctx, out.SKU, operator)
		return err
	})
	return out, dup, err
}

// ClosePurchaseOrder closes a purchase order: what never arrived leaves incoming
// (purchase_cancelled). Closing a closed order returns it with duplicate=true; a fully
// received one has nothing to close (ErrPurchaseOrderNotOpen).
func (s *Service) ClosePurchaseOrder(ctx context.Context, id int64, operator string) (out stock.PurchaseOrder, dup bool, err error) {
	err = s.store.InTx(ctx, func(tx Tx) error {
		out, dup, err = tx.ClosePurchaseOrder(ctx, id, operator)
		return err
	})
	return out, dup, err
}

// GetPurchaseOrder reads a purchase order with its receipts; ErrPurchaseOrderNotFound when
// there is none.
func (s *Service) GetPurchaseOrder(ctx context.Context, id int64) (stock.PurchaseOrder, error) {
	return s.store.GetPurchaseOrder(ctx, id)
}

// PurchaseOrders lists up to limit purchase orders of a SKU with id < before (0: from the
// newest), newest first; ErrUnknownSKU when there is no such SKU.
func (s *Service) PurchaseOrders(ctx context.Context, sku string, before int64, limit int) ([]stock.PurchaseOrder, error) {
	return s.store.PurchaseOrders(ctx, sku, before, limit)
}
