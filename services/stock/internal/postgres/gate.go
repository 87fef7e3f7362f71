package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

var _ app.GateStore = (*Store)(nil)

// PutGate implements app.GateStore.
func (s *Store) PutGate(ctx context.Context, g app.GatePlan) error {
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO sku_gate (sku, arm_at, armed_by) SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM sku WHERE sku = $1)
		ON CONFLICT (sku) DO UPDATE SET arm_at = excluded.arm_at, armed_by = excluded.armed_by`, g.SKU, g.ArmAt, g.By)
	if err != nil {
		return fmt.Errorf("put gate %s: %w", g.SKU, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("put gate %s: %w", g.SKU, stock.ErrUnknownSKU)
	}
	return nil
}

// DeleteGate implements app.GateStore.
func (s *Store) DeleteGate(ctx context.Context, sku string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sku_gate WHERE sku = $1`, sku)
	if err != nil {
		return false, fmt.Errorf("delete gate %s: %w", sku, err)
	}
	return tag.RowsAffected() > 0, nil
}

// GatePlans implements app.GateStore.
func (s *Store) GatePlans(ctx context.Context) ([]app.GatePlan, error) {
	rows, _ := s.pool.Query(ctx, `SELECT sku, arm_at, armed_by FROM sku_gate ORDER BY sku`)
	plans, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (app.GatePlan, error) {
		var p app.GatePlan
		err := r.Scan(&p.SKU, &p.ArmAt, &p.By)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("gate plans: %w", err)
	}
	return plans, nil
}

// GatePlan implements app.GateStore.
func (s *Store) GatePlan(ctx context.Context, sku string) (app.GatePlan, bool, error) {
	p := app.GatePlan{SKU: sku}
	err := s.pool.QueryRow(ctx, `SELECT arm_at, armed_by FROM sku_gate WHERE sku = $1`, sku).Scan(&p.ArmAt, &p.By)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("gate plan %s: %w", sku, err)
	}
	return p, true, nil
}

// GateFigures implements app.GateStore: one REPEATABLE READ snapshot holds the SKU's
// available before read(), which reads the gate, and the fate of the orders read() says it
// holds — so every lock the snapshot counts was taken at the gate before read() ran.
func (s *Store) GateFigures(ctx context.Context, sku string, read func() ([]string, error)) (app.GateFigures, error) {
	f := app.GateFigures{Fates: map[string]app.OrderFate{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var known bool
		if err := tx.QueryRow(ctx, `SELECT count(*) > 0, coalesce(sum(available), 0) FROM sku_stock WHERE sku = $1`, sku).Scan(&known, &f.Available); err != nil {
			return err
		}
		if !known {
			return stock.ErrUnknownSKU
		}
		orders, err := read()
		if err != nil {
			return err
		}
		if len(orders) == 0 {
			return nil
		}
		rows, _ := tx.Query(ctx, `
			SELECT o.order_id, coalesce(l.state, o.outcome)
			FROM order_lock o LEFT JOIN stock_lock l ON l.order_id = o.order_id AND l.sku = $1
			WHERE o.order_id = ANY($2)`, sku, orders)
		var id, fate string
		_, err = pgx.ForEachRow(rows, []any{&id, &fate}, func() error {
			switch fate {
			case "locked", "sold", "shipped":
				f.Fates[id] = app.FateHeld
			default: // released, refunded, rejected
				f.Fates[id] = app.FateReturned
			}
			return nil
		})
		return err
	})
	if err != nil {
		return app.GateFigures{}, fmt.Errorf("gate figures %s: %w", sku, err)
	}
	return f, nil
}
