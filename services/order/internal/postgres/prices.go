package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/catalog"
)

var _ app.PriceList = (*Store)(nil)

// PutPrice implements app.PriceList: one upsert.
func (s *Store) PutPrice(ctx context.Context, p catalog.Price) error {
	var window *int64
	if w := int64(p.PaymentWindow()); w != 0 {
		window = &w
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO sku_price (sku, unit_price, currency, payment_window_ns, updated_at, updated_by)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (sku) DO UPDATE SET unit_price = excluded.unit_price, currency = excluded.currency,
		       payment_window_ns = excluded.payment_window_ns, updated_at = excluded.updated_at,
		       updated_by = excluded.updated_by`,
		p.SKU(), p.UnitPrice().Int64(), p.Currency(), window, p.UpdatedAt(), p.UpdatedBy())
	if err != nil {
		return fmt.Errorf("put price of %s: %w", p.SKU(), err)
	}
	return nil
}

// Prices implements app.PriceList in one statement, whatever the number of SKUs.
func (s *Store) Prices(ctx context.Context, skus []string) (map[string]catalog.Price, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT sku, unit_price, currency, coalesce(payment_window_ns, 0), updated_at, updated_by
		  FROM sku_price WHERE sku = ANY($1)`, skus)
	if err != nil {
		return nil, fmt.Errorf("read prices: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (catalog.Price, error) {
		var (
			sku, currency, by string
			price, window     int64
			at                time.Time
		)
		if err := r.Scan(&sku, &price, &currency, &window, &at, &by); err != nil {
			return catalog.Price{}, err
		}
		return catalog.Restore(sku, price, currency, time.Duration(window), at, by)
	})
	if err != nil {
		return nil, fmt.Errorf("read prices: %w", err)
	}
	out := make(map[string]catalog.Price, len(list))
	for _, p := range list {
		out[p.SKU()] = p
	}
	return out, nil
}
