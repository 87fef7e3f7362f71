package postgres

import (
	"context"
	"fmt"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// SetSlots sets how many slots of a SKU take new locks, adding slot rows as needed, and
// rebalances its available units evenly over them. Slot rows are never dropped: after a
// reduction the retired ones keep their locked and sold units until those resolve, and hand
// over their available units now and whenever a rebalance runs.
func (t *Tx) SetSlots(ctx context.Context, sku string, n int, operator string) ([]stock.LedgerEntry, error) {
	if n < 1 || n > stock.MaxSlots {
		return nil, fmt.Errorf("%w: got %d", stock.ErrBadSlots, n)
	}
	tag, err := t.tx.Exec(ctx, `UPDATE sku SET slots = $2 WHERE sku = $1`, sku, n)
	if err != nil {
		return nil, fmt.Errorf("set slots of %s: %w", sku, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, fmt.Errorf("sku %s: %w", sku, stock.ErrUnknownSKU)
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO sku_stock (sku, slot) SELECT $1, g FROM generate_series(0, $2 - 1) AS g ON CONFLICT DO NOTHING`, sku, n)
	if err != nil {
		return nil, fmt.Errorf("add slots of %s: %w", sku, err)
	}
	return t.Rebalance(ctx, sku, operator)
}

// Rebalance spreads a SKU's available units evenly over its active slots (retired slots hand
// over all of theirs), as one pair of rebalance ledger rows per transfer, and returns the rows.
// The SKU's totals do not change; nothing is written when the slots are already even.
func (t *Tx) Rebalance(ctx context.Context, sku, operator string) ([]stock.LedgerEntry, error) {
	h, err := t.holdSlotsOf(ctx, []string{sku}, false)
	if err != nil {
		return nil, err
	}
	moves, err := h.Spread(sku)
	if err != nil {
		return nil, err
	}
	if len(moves) == 0 {
		return nil, nil
	}
	entries, errs, err := t.moveGroups(ctx, []stock.MoveGroup{{Moves: moves, Operator: operator}})
	if err != nil {
		return nil, err
	}
	if errs[0] != nil {
		return nil, errs[0]
	}
	return entries[0], t.flush(ctx)
}
