package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// group is movements that happen all or none (one order's lines), by one operator.
type group struct {
	moves    []stock.Movement
	operator string
}

// moveGroups applies many groups of order movements in one pass — the combining of DESIGN §7.
// It takes the summary row of every SKU involved FOR UPDATE, in SKU order (so two batches wait
// for each other instead of deadlocking), then walks the groups in order, each all or none: a
// group that does not fit where the groups before it left the figures gets a MovementError
// naming its first SKU that did not fit (ErrInsufficientStock, or ErrUnknownSKU), and the walk
// goes on, so no group is refused while stock for it remains. Then one conditional UPDATE
// moves each SKU by the sum of what was accepted and one INSERT appends the ledger rows — one
// per movement, each with the figures before and after it.
//
// It returns, per group, the ledger rows written or the error that left it out; err is for
// the batch as a whole.
func moveGroups(ctx context.Context, tx pgx.Tx, groups []group) (entries [][]stock.LedgerEntry, errs []error, err error) {
	if len(groups) == 0 {
		return nil, nil, nil
	}
	figures, err := lockSummaries(ctx, tx, groups)
	if err != nil {
		return nil, nil, err
	}
	entries, errs = make([][]stock.LedgerEntry, len(groups)), make([]error, len(groups))
	sums := map[string]stock.Quantities{}
	var rows []stock.LedgerEntry
	for gi, g := range groups {
		es, err := walk(figures, g)
		if err != nil {
			errs[gi] = err
			continue
		}
		for _, e := range es {
			figures[e.SKU] = e.After
			sums[e.SKU] = sums[e.SKU].Plus(e.After.Minus(e.Before))
		}
		entries[gi] = es
		rows = append(rows, es...)
	}
	if len(rows) == 0 {
		return entries, errs, nil
	}
	if err := updateSummaries(ctx, tx, sums); err != nil {
		return nil, nil, err
	}
	if err := insertLedger(ctx, tx, rows); err != nil {
		return nil, nil, err
	}
	// insertLedger filled in the ids; copy them into the per-group slices.
	byKey := make(map[string]stock.LedgerEntry, len(rows))
	for _, e := range rows {
		byKey[e.IdempotencyKey] = e
	}
	for _, es := range entries {
		for i := range es {
			es[i] = byKey[es[i].IdempotencyKey]
		}
	}
	return entries, errs, nil
}

// walk applies g's movements to figures tentatively and returns their ledger rows, or the
// error of the first movement that does not fit. figures is not changed.
func walk(figures map[string]stock.Quantities, g group) ([]stock.LedgerEntry, error) {
	es := make([]stock.LedgerEntry, 0, len(g.moves))
	moved := map[string]stock.Quantities{}
	for _, m := range g.moves {
		cur, ok := moved[m.SKU]
		if !ok {
			if cur, ok = figures[m.SKU]; !ok {
				return nil, &stock.MovementError{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), Err: stock.ErrUnknownSKU}
			}
		}
		if !m.Fits(cur) {
			return nil, &stock.MovementError{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), Err: stock.ErrInsufficientStock}
		}
		next := cur.Plus(m.Delta)
		moved[m.SKU] = next
		es = append(es, stock.LedgerEntry{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), Before: cur, After: next,
			OrderID: m.OrderID, Operator: g.operator, Remark: m.Remark, IdempotencyKey: orderKey(m)})
	}
	return es, nil
}

// lockSummaries reads the figures of every SKU in groups FOR UPDATE, in SKU order. SKUs that
// do not exist are absent from the map.
func lockSummaries(ctx context.Context, tx pgx.Tx, groups []group) (map[string]stock.Quantities, error) {
	var skus []string
	for _, g := range groups {
		for _, m := range g.moves {
			skus = append(skus, m.SKU)
		}
	}
	slices.Sort(skus)
	skus = slices.Compact(skus)
	rows, err := tx.Query(ctx, `SELECT sku, on_hand, locked, sold, incoming FROM sku_stock WHERE sku = ANY($1) ORDER BY sku FOR UPDATE`, skus)
	if err != nil {
		return nil, fmt.Errorf("lock %d skus: %w", len(skus), err)
	}
	defer rows.Close()
	figures := make(map[string]stock.Quantities, len(skus))
	for rows.Next() {
		var sku string
		var q stock.Quantities
		if err := rows.Scan(&sku, &q.OnHand, &q.Locked, &q.Sold, &q.Incoming); err != nil {
			return nil, fmt.Errorf("lock %d skus: %w", len(skus), err)
		}
		figures[sku] = q
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock %d skus: %w", len(skus), err)
	}
	return figures, nil
}

// updateSummaries moves each SKU by its sum, on condition that every figure stays valid — the
// same guard as a single movement's, checked again by the database's constraints.
func updateSummaries(ctx context.Context, tx pgx.Tx, sums map[string]stock.Quantities) error {
	n := len(sums)
	skus := make([]string, 0, n)
	var onHand, locked, sold, incoming []int64
	for _, sku := range slices.Sorted(maps.Keys(sums)) {
		d := sums[sku]
		skus = append(skus, sku)
		onHand, locked, sold, incoming = append(onHand, d.OnHand), append(locked, d.Locked), append(sold, d.Sold), append(incoming, d.Incoming)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE sku_stock s
		   SET on_hand = s.on_hand + u.on_hand, locked = s.locked + u.locked, sold = s.sold + u.sold,
		       incoming = s.incoming + u.incoming, available = s.available + u.on_hand - u.locked - u.sold, updated_at = now()
		  FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) AS u(sku, on_hand, locked, sold, incoming)
		 WHERE s.sku = u.sku
		   AND s.available + u.on_hand - u.locked - u.sold >= 0 AND s.on_hand + u.on_hand >= 0
		   AND s.locked + u.locked >= 0 AND s.sold + u.sold >= 0 AND s.incoming + u.incoming >= 0`,
		skus, onHand, locked, sold, incoming)
	if err != nil {
		return fmt.Errorf("move %d skus: %w", n, err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("move %d skus: %d rows matched the guard; summaries changed under a row lock", n, tag.RowsAffected())
	}
	return nil
}

// insertLedger appends rows in their order (ids ascend with it) and fills in their ids and
// times.
func insertLedger(ctx context.Context, tx pgx.Tx, rows []stock.LedgerEntry) error {
	n := len(rows)
	skus, types, orders, operators, remarks, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	var qty []int64
	var figures [8][]int64 // on_hand, locked, sold, incoming before, then after
	for i, e := range rows {
		skus[i], types[i], orders[i], operators[i], remarks[i], keys[i] = e.SKU, string(e.Type), e.OrderID, e.Operator, e.Remark, e.IdempotencyKey
		qty = append(qty, e.Qty)
		for k, v := range []int64{e.Before.OnHand, e.Before.Locked, e.Before.Sold, e.Before.Incoming, e.After.OnHand, e.After.Locked, e.After.Sold, e.After.Incoming} {
			figures[k] = append(figures[k], v)
		}
	}
	res, err := tx.Query(ctx, `
		INSERT INTO stock_ledger (sku, change_type, qty, on_hand_before, locked_before, sold_before, incoming_before,
		       on_hand_after, locked_after, sold_after, incoming_after, order_id, operator, remark, idempotency_key)
		SELECT sku, ct, qty, ob, lb, sb, ib, oa, la, sa, ia, nullif(oid, ''), op, rm, k
		  FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[],
		              $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[], $15::text[])
		       WITH ORDINALITY AS u(sku, ct, qty, ob, lb, sb, ib, oa, la, sa, ia, oid, op, rm, k, n)
		 ORDER BY n
		RETURNING idempotency_key, id, created_at`,
		skus, types, qty, figures[0], figures[1], figures[2], figures[3],
		figures[4], figures[5], figures[6], figures[7], orders, operators, remarks, keys)
	if err != nil {
		return fmt.Errorf("append %d ledger rows: %w", n, err)
	}
	index := make(map[string]int, n)
	for i, k := range keys {
		index[k] = i
	}
	for res.Next() {
		var k string
		var e stock.LedgerEntry
		if err := res.Scan(&k, &e.ID, &e.CreatedAt); err != nil {
			res.Close()
			return fmt.Errorf("append %d ledger rows: %w", n, err)
		}
		rows[index[k]].ID, rows[index[k]].CreatedAt = e.ID, e.CreatedAt
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("append %d ledger rows: %w", n, err)
	}
	return nil
}
