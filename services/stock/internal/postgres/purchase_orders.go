package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Purchase orders (migration 00006). Each movement of an order is a movement not tied to a
// lock, in slot 0 where incoming is kept (stock.ArrivalSlot), under a ledger key of its own:
// purchase_order/<id>/expected, /receipt:<the caller's key>, /closed. A receipt or a close
// holds the order's row FOR UPDATE before anything else, so the order's receipts are decided
// one at a time and a replayed key is found before it could be written twice.

// CreatePurchaseOrder stores p and raises incoming by its units, under the caller's key: the
// same key again returns the first order with duplicate=true (ErrIdempotencyReuse when it was
// for another SKU or quantity). A concurrent request with the same key waits on the unique
// key's index entry and then finds the first order.
func (t *Tx) CreatePurchaseOrder(ctx context.Context, p stock.PurchaseOrder, key string) (stock.PurchaseOrder, bool, error) {
	if _, err := getSKU(ctx, t.tx, p.SKU, false); err != nil {
		return p, false, err
	}
	err := t.tx.QueryRow(ctx, `INSERT INTO purchase_order (sku, expected, remark, created_by, idempotency_key) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (idempotency_key) DO NOTHING RETURNING id, created_at`,
		p.SKU, p.Expected, p.Remark, p.CreatedBy, key).Scan(&p.ID, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		first, err := onePurchaseOrder(ctx, t.tx, fmt.Sprintf("key %q", key), `idempotency_key = $1`, key)
		if err == nil && (first.SKU != p.SKU || first.Expected != p.Expected) {
			err = fmt.Errorf("%w: key %q", stock.ErrIdempotencyReuse, key)
		}
		return first, true, err
	}
	if err != nil {
		return p, false, fmt.Errorf("create purchase order of %s: %w", p.SKU, err)
	}
	if _, err := t.moveOne(ctx, stock.SlotMove{Movement: p.Expect(), Slot: 0, Key: fmt.Sprintf("purchase_order/%d/expected", p.ID)}, p.CreatedBy); err != nil {
		return p, false, err
	}
	return p, false, nil
}

// ReceivePurchaseOrder records a receipt of n units under the caller's key (one per order):
// the same key again returns the order with duplicate=true, ErrIdempotencyReuse when it
// received another quantity. The order's figures, its receipt link and the ledger row are
// written together; a receipt the order refuses (stock.PurchaseOrder.Receive) writes nothing.
func (t *Tx) ReceivePurchaseOrder(ctx context.Context, id int64, n stock.Qty, key, operator, remark string) (stock.PurchaseOrder, bool, error) {
	p, err := getPurchaseOrder(ctx, t.tx, id, " FOR UPDATE")
	if err != nil {
		return p, false, err
	}
	key = fmt.Sprintf("purchase_order/%d/receipt:%s", id, key)
	first, err := ledgerByKey(ctx, t.tx, key)
	switch {
	case err == nil && first.Qty != n.Int64():
		return p, true, fmt.Errorf("%w: key %q", stock.ErrIdempotencyReuse, key)
	case err == nil:
		return p, true, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return p, false, fmt.Errorf("receive purchase order %d: %w", id, err)
	}
	m, err := p.Receive(n, remark)
	if err != nil {
		return p, false, err
	}
	e, err := t.moveOne(ctx, stock.SlotMove{Movement: m, Slot: 0, Key: key}, operator)
	if err != nil {
		return p, false, err
	}
	_, err = t.tx.Exec(ctx, `WITH r AS (INSERT INTO purchase_order_receipt (purchase_order_id, ledger_id, remark) VALUES ($1, $2, $3))
		UPDATE purchase_order SET received = received + $4 WHERE id = $1`, id, e.ID, remark, n.Int64())
	if err != nil {
		return p, false, fmt.Errorf("receive purchase order %d: %w", id, err)
	}
	p, err = getPurchaseOrder(ctx, t.tx, id, "")
	return p, false, err
}

// ClosePurchaseOrder closes an order: what never arrived leaves incoming (one
// purchase_cancelled row) and who closed it is recorded. A closed order is returned as it is
// with duplicate=true; a fully received one is ErrPurchaseOrderNotOpen.
func (t *Tx) ClosePurchaseOrder(ctx context.Context, id int64, operator string) (stock.PurchaseOrder, bool, error) {
	p, err := getPurchaseOrder(ctx, t.tx, id, " FOR UPDATE")
	if err != nil {
		return p, false, err
	}
	m, ok, err := p.Close()
	if err != nil || !ok {
		return p, !ok, err
	}
	if _, err := t.moveOne(ctx, stock.SlotMove{Movement: m, Slot: 0, Key: fmt.Sprintf("purchase_order/%d/closed", id)}, operator); err != nil {
		return p, false, err
	}
	if _, err := t.tx.Exec(ctx, `UPDATE purchase_order SET closed_by = $2, closed_at = now() WHERE id = $1`, id, operator); err != nil {
		return p, false, fmt.Errorf("close purchase order %d: %w", id, err)
	}
	p, err = getPurchaseOrder(ctx, t.tx, id, "")
	return p, false, err
}

// GetPurchaseOrder reads a purchase order and its receipts; ErrPurchaseOrderNotFound when
// there is none.
func (s *Store) GetPurchaseOrder(ctx context.Context, id int64) (stock.PurchaseOrder, error) {
	return getPurchaseOrder(ctx, s.pool, id, "")
}

// PurchaseOrders returns up to limit purchase orders of a SKU with id < before (0: any),
// newest first, with their receipts; ErrUnknownSKU when there is no such SKU.
func (s *Store) PurchaseOrders(ctx context.Context, sku string, before int64, limit int) ([]stock.PurchaseOrder, error) {
	if _, err := s.GetSKU(ctx, sku); err != nil {
		return nil, err
	}
	if before <= 0 {
		before = math.MaxInt64
	}
	out, err := purchaseOrders(ctx, s.pool, `sku = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, sku, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list purchase orders of %s: %w", sku, err)
	}
	return out, nil
}

func getPurchaseOrder(ctx context.Context, q querier, id int64, suffix string) (stock.PurchaseOrder, error) {
	return onePurchaseOrder(ctx, q, fmt.Sprint(id), `id = $1`+suffix, id)
}

// onePurchaseOrder reads the purchase order cond picks (named name in errors), or
// ErrPurchaseOrderNotFound.
func onePurchaseOrder(ctx context.Context, q querier, name, cond string, args ...any) (stock.PurchaseOrder, error) {
	pos, err := purchaseOrders(ctx, q, cond, args...)
	if err != nil {
		return stock.PurchaseOrder{}, fmt.Errorf("read purchase order %s: %w", name, err)
	}
	if len(pos) == 0 {
		return stock.PurchaseOrder{}, fmt.Errorf("purchase order %s: %w", name, stock.ErrPurchaseOrderNotFound)
	}
	return pos[0], nil
}

// purchaseOrders reads the purchase orders cond picks (the SQL after WHERE: it may order,
// limit and lock them) and then their receipts, in one query for all of them.
func purchaseOrders(ctx context.Context, q querier, cond string, args ...any) ([]stock.PurchaseOrder, error) {
	rows, err := q.Query(ctx, `SELECT id, sku, expected, received, remark, created_by, created_at, coalesce(closed_by, ''), closed_at
		FROM purchase_order WHERE `+cond, args...)
	if err != nil {
		return nil, err
	}
	pos, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stock.PurchaseOrder, error) {
		var p stock.PurchaseOrder
		err := row.Scan(&p.ID, &p.SKU, &p.Expected, &p.Received, &p.Remark, &p.CreatedBy, &p.CreatedAt, &p.ClosedBy, &p.ClosedAt)
		return p, err
	})
	if err != nil || len(pos) == 0 {
		return pos, err
	}
	ids := make([]int64, len(pos))
	at := make(map[int64]*stock.PurchaseOrder, len(pos))
	for i := range pos {
		ids[i], at[pos[i].ID] = pos[i].ID, &pos[i]
	}
	rows, err = q.Query(ctx, `SELECT r.purchase_order_id, l.id, l.qty, l.operator, r.remark, l.created_at
		FROM purchase_order_receipt r JOIN stock_ledger l ON l.id = r.ledger_id
		WHERE r.purchase_order_id = ANY($1) ORDER BY l.id`, ids)
	if err != nil {
		return nil, err
	}
	var id int64
	var r stock.Receipt
	_, err = pgx.ForEachRow(rows, []any{&id, &r.LedgerID, &r.Qty, &r.Operator, &r.Remark, &r.At}, func() error {
		at[id].Receipts = append(at[id].Receipts, r)
		return nil
	})
	return pos, err
}
