package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// foldSQL folds the ledger of every slot of every SKU: the sum of each figure's
// after-minus-before.
const foldSQL = `
SELECT s.sku, s.slot, s.on_hand, s.locked, s.sold, s.incoming, s.available,
       coalesce(f.on_hand, 0), coalesce(f.locked, 0), coalesce(f.sold, 0), coalesce(f.incoming, 0),
       coalesce(k.locked, 0), coalesce(k.sold, 0)
  FROM sku_stock s
  LEFT JOIN (SELECT sku, slot, sum(on_hand_after - on_hand_before) AS on_hand, sum(locked_after - locked_before) AS locked,
                    sum(sold_after - sold_before) AS sold, sum(incoming_after - incoming_before) AS incoming
               FROM stock_ledger GROUP BY sku, slot) f ON f.sku = s.sku AND f.slot = s.slot
  LEFT JOIN (SELECT sku, slot, sum(qty) FILTER (WHERE state = 'locked') AS locked, sum(qty) FILTER (WHERE state = 'sold') AS sold
               FROM stock_lock GROUP BY sku, slot) k ON k.sku = s.sku AND k.slot = s.slot
 ORDER BY s.sku, s.slot`

// chainSQL finds ledger rows whose before figures are not the previous row's (of the same
// slot) after figures.
const chainSQL = `
SELECT sku, slot, id, on_hand_before, locked_before, sold_before, incoming_before, p_on_hand, p_locked, p_sold, p_incoming
  FROM (SELECT sku, slot, id, on_hand_before, locked_before, sold_before, incoming_before,
               coalesce(lag(on_hand_after) OVER w, 0) AS p_on_hand, coalesce(lag(locked_after) OVER w, 0) AS p_locked,
               coalesce(lag(sold_after) OVER w, 0) AS p_sold, coalesce(lag(incoming_after) OVER w, 0) AS p_incoming
          FROM stock_ledger WINDOW w AS (PARTITION BY sku, slot ORDER BY id)) c
 WHERE (on_hand_before, locked_before, sold_before, incoming_before) <> (p_on_hand, p_locked, p_sold, p_incoming)
 ORDER BY sku, slot, id`

// Verify compares every slot of every SKU with the fold of its ledger rows and with its lock
// rows (locked and sold equal the units of locks in those states), and checks that each ledger
// row starts where the previous one of its slot ended, and that no slot is oversold
// (app.CheckOversell). It returns every difference; none means consistent.
func (s *Store) Verify(ctx context.Context) ([]stock.Difference, error) {
	var diffs []stock.Difference
	err := postgres.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		// One snapshot for both queries, so a concurrent movement cannot look like a difference.
		if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`); err != nil {
			return err
		}
		var err error
		diffs, err = verify(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	return diffs, nil
}

func verify(ctx context.Context, tx pgx.Tx) ([]stock.Difference, error) {
	diffs := []stock.Difference{}
	rows, err := tx.Query(ctx, foldSQL)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var sku string
		var slot int
		var sum, fold [4]int64
		var available, lockLocked, lockSold int64
		if err := rows.Scan(&sku, &slot, &sum[0], &sum[1], &sum[2], &sum[3], &available, &fold[0], &fold[1], &fold[2], &fold[3], &lockLocked, &lockSold); err != nil {
			rows.Close()
			return nil, err
		}
		if d, ok := oversold(sku, slot, sum[0], sum[1], sum[2], available); ok {
			diffs = append(diffs, d)
		}
		for i, field := range []string{"on_hand", "locked", "sold", "incoming"} {
			if sum[i] != fold[i] {
				diffs = append(diffs, stock.Difference{SKU: sku, Slot: slot, Check: "ledger_fold", Field: field, Summary: sum[i], Expect: fold[i]})
			}
		}
		if sum[1] != lockLocked {
			diffs = append(diffs, stock.Difference{SKU: sku, Slot: slot, Check: "locks", Field: "locked", Summary: sum[1], Expect: lockLocked})
		}
		if sum[2] != lockSold {
			diffs = append(diffs, stock.Difference{SKU: sku, Slot: slot, Check: "locks", Field: "sold", Summary: sum[2], Expect: lockSold})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, chainSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var sku string
		var slot int
		var id int64
		var b, p [4]int64
		if err := rows.Scan(&sku, &slot, &id, &b[0], &b[1], &b[2], &b[3], &p[0], &p[1], &p[2], &p[3]); err != nil {
			return nil, err
		}
		for i, field := range []string{"on_hand", "locked", "sold", "incoming"} {
			if b[i] != p[i] {
				diffs = append(diffs, stock.Difference{SKU: sku, Slot: slot, Check: "ledger_chain", Field: field, Summary: b[i], Expect: p[i],
					Detail: fmt.Sprintf("ledger row %d starts at %d, the previous row ended at %d", id, b[i], p[i])})
			}
		}
	}
	return diffs, rows.Err()
}

// oversold reports a slot whose figures promise more than it holds: sold + locked > on_hand,
// or a stored available below zero. The table's constraints forbid both; a row edited past
// them (or a constraint dropped) shows here. Summary is the units promised beyond on_hand.
func oversold(sku string, slot int, onHand, locked, sold, available int64) (stock.Difference, bool) {
	over := max(locked+sold-onHand, -available)
	if over <= 0 {
		return stock.Difference{}, false
	}
	return stock.Difference{SKU: sku, Slot: slot, Check: app.CheckOversell, Field: "available", Summary: -over, Expect: 0,
		Detail: fmt.Sprintf("on_hand %d, locked %d, sold %d, available %d", onHand, locked, sold, available)}, true
}

// Rebuild recomputes every slot's figures from the ledger in one transaction (the ledger wins)
// and returns the SKUs it changed.
func (s *Store) Rebuild(ctx context.Context) ([]string, error) {
	var changed []string
	err := postgres.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE sku_stock IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			UPDATE sku_stock s
			   SET on_hand = f.on_hand, locked = f.locked, sold = f.sold, incoming = f.incoming,
			       available = f.on_hand - f.locked - f.sold, updated_at = now()
			  FROM (SELECT s2.sku, s2.slot, coalesce(sum(l.on_hand_after - l.on_hand_before), 0) AS on_hand,
			               coalesce(sum(l.locked_after - l.locked_before), 0) AS locked,
			               coalesce(sum(l.sold_after - l.sold_before), 0) AS sold,
			               coalesce(sum(l.incoming_after - l.incoming_before), 0) AS incoming
			          FROM sku_stock s2 LEFT JOIN stock_ledger l ON l.sku = s2.sku AND l.slot = s2.slot GROUP BY s2.sku, s2.slot) f
			 WHERE s.sku = f.sku AND s.slot = f.slot
			   AND (s.on_hand, s.locked, s.sold, s.incoming) IS DISTINCT FROM (f.on_hand, f.locked, f.sold, f.incoming)
			RETURNING s.sku`)
		if err != nil {
			return err
		}
		changed, err = pgx.CollectRows(rows, pgx.RowTo[string])
		slices.Sort(changed)
		changed = slices.Compact(changed)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	return changed, nil
}
