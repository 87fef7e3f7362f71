package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

var _ app.AvailabilitySource = (*Store)(nil)

// GetOrderOutcome reads an order's outcome; stock.ErrOrderUnknown when stock never saw it.
func (s *Store) GetOrderOutcome(ctx context.Context, orderID string) (stock.OrderOutcome, error) {
	o := stock.OrderOutcome{OrderID: orderID}
	var reason, sku, paidBy *string
	err := s.pool.QueryRow(ctx, `SELECT outcome, reject_reason, reject_sku, payment_id, deadline FROM order_lock WHERE order_id = $1`, orderID).
		Scan(&o.Outcome, &reason, &sku, &paidBy, &o.Deadline)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, fmt.Errorf("order %s: %w", orderID, stock.ErrOrderUnknown)
	}
	if err != nil {
		return o, fmt.Errorf("read order %s: %w", orderID, err)
	}
	for dst, src := range map[*string]*string{&o.RejectReason: reason, &o.RejectSKU: sku, &o.PaidBy: paidBy} {
		if src != nil {
			*dst = *src
		}
	}
	if o.Locks, err = s.Locks(ctx, orderID); err != nil {
		return o, err
	}
	err = s.pool.QueryRow(ctx, `SELECT change_type FROM stock_ledger WHERE order_id = $1
		AND change_type IN ('release_timeout', 'release_cancel') ORDER BY id DESC LIMIT 1`, orderID).Scan(&o.ReleasedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil
	}
	if err != nil {
		return o, fmt.Errorf("read release of order %s: %w", orderID, err)
	}
	return o, nil
}

// HeldOrders returns up to limit orders holding locks taken before cutoff, oldest first, and
// how many such orders there are: the candidates of the orphan-lock job.
func (s *Store) HeldOrders(ctx context.Context, cutoff time.Time, limit int) (int, []string, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(DISTINCT order_id) FROM stock_lock WHERE state = 'locked' AND created_at < $1`, cutoff).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("count held orders: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT order_id FROM stock_lock WHERE state = 'locked' AND created_at < $1
		GROUP BY order_id ORDER BY min(created_at), order_id LIMIT $2`, cutoff, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("list held orders: %w", err)
	}
	orders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, nil, fmt.Errorf("list held orders: %w", err)
	}
	return n, orders, nil
}

// CountSKUs returns how many SKUs there are.
func (s *Store) CountSKUs(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sku`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count skus: %w", err)
	}
	return n, nil
}

// SKUQuantities returns the figures of those of skus that exist, summed over their slots, in
// one query (the watched SKUs' gauges).
func (s *Store) SKUQuantities(ctx context.Context, skus []string) (map[string]stock.Quantities, error) {
	rows, err := s.pool.Query(ctx, `SELECT sku, sum(on_hand), sum(locked), sum(sold), sum(incoming) FROM sku_stock
		WHERE sku = ANY($1) GROUP BY sku`, skus)
	if err != nil {
		return nil, fmt.Errorf("read %d skus: %w", len(skus), err)
	}
	defer rows.Close()
	out := make(map[string]stock.Quantities, len(skus))
	for rows.Next() {
		var sku string
		var q stock.Quantities
		if err := rows.Scan(&sku, &q.OnHand, &q.Locked, &q.Sold, &q.Incoming); err != nil {
			return nil, fmt.Errorf("read %d skus: %w", len(skus), err)
		}
		out[sku] = q
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %d skus: %w", len(skus), err)
	}
	return out, nil
}

// CountOverdueLocks counts the locks still held whose deadline is before cutoff: one count
// over the partial index of held locks by deadline.
func (s *Store) CountOverdueLocks(ctx context.Context, cutoff time.Time) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM stock_lock WHERE state = 'locked' AND deadline < $1`, cutoff).Scan(&n); err != nil {
		return 0, fmt.Errorf("count overdue locks: %w", err)
	}
	return n, nil
}

// Availability returns every SKU's available units, summed over its slots, in one query: the
// storefront read model's refresh (app.Availability). It reads every row of sku_stock (SKUs ×
// slots; at 10^5 SKUs a sequential scan of a few MB, cheaper than keeping track of which SKUs
// were asked for) and sums here: a plain scan has one plan whatever the table's statistics say,
// where a GROUP BY misestimated on a fresh table sorts and spills to disk (measured 4× slower).
func (s *Store) Availability(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT sku, available FROM sku_stock`)
	if err != nil {
		return nil, fmt.Errorf("read availability: %w", err)
	}
	out := map[string]int64{}
	var sku string
	var available int64
	if _, err := pgx.ForEachRow(rows, []any{&sku, &available}, func() error {
		out[sku] += available
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read availability: %w", err)
	}
	return out, nil
}

// params numbers a query's arguments as its conditions are written: p.add(v) is v's placeholder.
type params []any

func (p *params) add(v any) string {
	*p = append(*p, v)
	return "$" + strconv.Itoa(len(*p))
}

// ListSKUs returns up to limit SKUs named after after, in sku order, whose names start with
// prefix, each summed over its slots. The page of names is taken first (the primary key, in
// order, from after on), then each one's slots are summed: a GROUP BY over the join would plan
// on the tables' statistics and may sum every SKU before the LIMIT (Availability). The prefix
// is a filter, not a range, so the order and the cursor stay the collation's.
func (s *Store) ListSKUs(ctx context.Context, prefix, after string, limit int) ([]stock.SKUStock, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT k.sku, k.slots, f.on_hand, f.locked, f.sold, f.incoming, f.updated_at
		  FROM (SELECT sku, slots FROM sku WHERE sku > $1 AND starts_with(sku, $2) ORDER BY sku LIMIT $3) k
		 CROSS JOIN LATERAL (SELECT sum(on_hand), sum(locked), sum(sold), sum(incoming), max(updated_at)
		                       FROM sku_stock WHERE sku = k.sku GROUP BY sku) f (on_hand, locked, sold, incoming, updated_at)
		 ORDER BY k.sku`, after, prefix, limit)
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stock.SKUStock, error) {
		var st stock.SKUStock
		err := row.Scan(&st.SKU, &st.Slots, &st.OnHand, &st.Locked, &st.Sold, &st.Incoming, &st.UpdatedAt)
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", err)
	}
	return out, nil
}

// Adjustments returns the adjustments q picks, newest first: a backward scan of the primary
// key, filtered (adjustments are filed by hand; there are few).
func (s *Store) Adjustments(ctx context.Context, q app.AdjustmentQuery) ([]stock.Adjustment, error) {
	var p params
	where := "true"
	if q.State != "" {
		where += " AND state = " + p.add(string(q.State))
	}
	if q.SKU != "" {
		where += " AND sku = " + p.add(q.SKU)
	}
	if q.Before > 0 {
		where += " AND id < " + p.add(q.Before)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+adjustmentColumns+` FROM adjustment WHERE `+where+` ORDER BY id DESC LIMIT `+p.add(q.Limit), p...)
	if err != nil {
		return nil, fmt.Errorf("list adjustments: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stock.Adjustment, error) { return scanAdjustment(row) })
	if err != nil {
		return nil, fmt.Errorf("list adjustments: %w", err)
	}
	return out, nil
}
