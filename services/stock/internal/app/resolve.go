package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// resolve moves every lock of an order with step inside tx. A lock already past the step
// (ErrAlreadyResolved) makes the whole call a reported no-op; other errors are returned.
func resolve(ctx context.Context, tx *postgres.Tx, orderID, operator string, step func(*stock.Lock) (stock.Movement, error)) (Resolution, error) {
	res := Resolution{OrderID: orderID}
	entries, err := tx.UpdateLocks(ctx, orderID, operator, func(locks []*stock.Lock) ([]stock.Movement, error) {
		ms := make([]stock.Movement, 0, len(locks))
		for _, l := range locks {
			before := l.State()
			m, err := step(l)
			if err != nil {
				res.State = string(before)
				return nil, err
			}
			res.Relocked = res.Relocked || (before == stock.StateReleased && l.State() == stock.StateSold)
			res.State = string(l.State())
			ms = append(ms, m)
		}
		return ms, nil
	})
	if errors.Is(err, stock.ErrAlreadyResolved) {
		res.Relocked = false
		res.NoOp = fmt.Sprintf("locks already %s", res.State)
		return res, nil
	}
	if err != nil {
		res.Relocked = false
		return res, fmt.Errorf("order %s: %w", orderID, err)
	}
	res.Applied = true
	for _, e := range entries {
		res.Entries = append(res.Entries, LedgerSummary{ID: e.ID, SKU: e.SKU, Type: string(e.Type), Qty: e.Qty})
	}
	return res, nil
}
