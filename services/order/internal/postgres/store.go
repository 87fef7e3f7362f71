// Package postgres stores orders in PostgreSQL: the orders, their lines and their append-only
// history, the migrations that create them, and the one transaction per use case in which
// the outbox and inbox rows are written too.
package postgres

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the order service's own migrations.
var Schema = postgres.MigrationsSchema("order", migrations)

// Schemas are every schema the order database needs, in the order to apply them.
func Schemas() []postgres.Schema { return service.Schemas(Schema) }

// Store is the app.Repository on PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
}

var _ app.Repository = (*Store)(nil)

// New returns a Store on pool, whose database has Schemas applied.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Create implements app.Repository. Two concurrent requests with one key serialise on the
// unique index: the second waits for the first to commit and then finds its order.
func (s *Store) Create(ctx context.Context, o *order.Order, key string, requestHash []byte, msgs []events.Message) (stored *order.Order, created bool, err error) {
	snap := o.Snapshot()
	err = outbox.InTxBatch(ctx, s.pool, func(tx pgx.Tx, _ *pgx.Batch) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO orders (id, idempotency_key, request_hash, buyer_id, currency, total, payment_timeout_ns,
			                    status, created_at, expires_at, updated_at, cancel_requested_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT (idempotency_key) DO NOTHING`,
			snap.ID, key, requestHash, snap.BuyerID, snap.Currency, snap.Total, int64(snap.PaymentTimeout),
			snap.Status, snap.CreatedAt, snap.ExpiresAt, snap.UpdatedAt, nullTime(snap.CancelRequestedAt))
		if err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return s.replay(ctx, tx, key, requestHash, &stored)
		}
		if err := insertItems(ctx, tx, snap); err != nil {
			return err
		}
		if err := insertHistory(ctx, tx, snap.ID, 0, snap.History); err != nil {
			return err
		}
		if err := outbox.Write(ctx, tx, msgs...); err != nil {
			return err
		}
		stored, created = o, true
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("create order: %w", err)
	}
	return stored, created, nil
}

// replay loads the order an earlier request stored under key, if that request was the same.
func (s *Store) replay(ctx context.Context, tx pgx.Tx, key string, requestHash []byte, stored **order.Order) error {
	var id string
	var hash []byte
	err := tx.QueryRow(ctx, `SELECT id, request_hash FROM orders WHERE idempotency_key = $1`, key).Scan(&id, &hash)
	if err != nil {
		return fmt.Errorf("look up idempotency key: %w", err)
	}
	if !bytes.Equal(hash, requestHash) {
		return fmt.Errorf("%w (order %s)", app.ErrIdempotencyConflict, id)
	}
	o, err := load(ctx, tx, id)
	if err != nil {
		return err
	}
	*stored = o
	return nil
}

func insertItems(ctx context.Context, tx pgx.Tx, snap order.Snapshot) error {
	skus := make([]string, len(snap.Items))
	qtys := make([]int64, len(snap.Items))
	prices := make([]int64, len(snap.Items))
	for i, it := range snap.Items {
		skus[i], qtys[i], prices[i] = it.SKU, it.Qty, it.UnitPrice
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO order_items (order_id, line, sku, qty, unit_price)
		SELECT $1, i.ord - 1, i.sku, i.qty, i.price
		  FROM unnest($2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS i (sku, qty, price, ord)`,
		snap.ID, skus, qtys, prices)
	if err != nil {
		return fmt.Errorf("insert order items: %w", err)
	}
	return nil
}

// insertHistory appends entries as steps first, first+1, … of order id.
func insertHistory(ctx context.Context, tx pgx.Tx, id string, first int, entries []order.HistoryEntry) error {
	if len(entries) == 0 {
		return nil
	}
	statuses := make([]string, len(entries))
	reasons := make([]string, len(entries))
	ats := make([]time.Time, len(entries))
	for i, h := range entries {
		statuses[i], reasons[i], ats[i] = h.Status.String(), h.Reason, h.At
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO order_history (order_id, seq, status, reason, at)
		SELECT $1, $2 + h.ord - 1, h.status, h.reason, h.at
		  FROM unnest($3::text[], $4::text[], $5::timestamptz[]) WITH ORDINALITY AS h (status, reason, at, ord)`,
		id, first, statuses, reasons, ats)
	if err != nil {
		return fmt.Errorf("insert order history: %w", err)
	}
	return nil
}

// Get implements app.Repository. One statement reads the order, its lines and its history,
// so they come from one snapshot.
func (s *Store) Get(ctx context.Context, id string) (*order.Order, error) {
	o, err := load(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Update implements app.Repository.
func (s *Store) Update(ctx context.Context, id string, fn func(*order.Order) error) error {
	_, err := s.UpdateWith(ctx, id, nil, func(o *order.Order) ([]events.Message, error) { return nil, fn(o) })
	return err
}

// UpdateWith implements app.Repository: UpdateAll of one update. The inbox claim comes
// first, so a duplicate does not even lock the order; the order row is then locked FOR UPDATE
// before it is read, so the read sees every change committed before ours.
func (s *Store) UpdateWith(ctx context.Context, id string, in *inbox.Message, fn func(*order.Order) ([]events.Message, error)) (duplicate bool, err error) {
	res, err := s.UpdateAll(ctx, []app.Update{{ID: id, In: in, Fn: fn}})
	if err != nil {
		return false, fmt.Errorf("update order %s: %w", id, err)
	}
	return res[0].Duplicate, res[0].Err
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// selectOrders reads whole orders — row, lines and history — in one statement, so each comes
// from one snapshot. Append a WHERE clause on o.
const selectOrders = `
	SELECT o.id, o.buyer_id, o.currency, o.total, o.payment_timeout_ns, o.status,
	       o.created_at, o.expires_at, o.updated_at, o.cancel_requested_at,
	       ARRAY(SELECT sku FROM order_items WHERE order_id = o.id ORDER BY line),
	       ARRAY(SELECT qty FROM order_items WHERE order_id = o.id ORDER BY line),
	       ARRAY(SELECT unit_price FROM order_items WHERE order_id = o.id ORDER BY line),
	       ARRAY(SELECT status FROM order_history WHERE order_id = o.id ORDER BY seq),
	       ARRAY(SELECT reason FROM order_history WHERE order_id = o.id ORDER BY seq),
	       ARRAY(SELECT at FROM order_history WHERE order_id = o.id ORDER BY seq)
	  FROM orders o `

func load(ctx context.Context, db querier, id string) (*order.Order, error) {
	orders, err := query(ctx, db, selectOrders+`WHERE o.id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("load order %s: %w", id, err)
	}
	if len(orders) == 0 {
		return nil, fmt.Errorf("%w: %s", order.ErrNotFound, id)
	}
	return orders[0], nil
}

func query(ctx context.Context, db querier, sql string, args ...any) ([]*order.Order, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*order.Order
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func scanOrder(row pgx.Row) (*order.Order, error) {
	var (
		s                   order.Snapshot
		timeoutNS           int64
		cancelAt            *time.Time
		skus                []string
		qtys, prices        []int64
		hStatuses, hReasons []string
		hAts                []time.Time
	)
	err := row.Scan(
		&s.ID, &s.BuyerID, &s.Currency, &s.Total, &timeoutNS, &s.Status,
		&s.CreatedAt, &s.ExpiresAt, &s.UpdatedAt, &cancelAt,
		&skus, &qtys, &prices, &hStatuses, &hReasons, &hAts)
	if err != nil {
		return nil, fmt.Errorf("scan order: %w", err)
	}
	s.PaymentTimeout = time.Duration(timeoutNS)
	if cancelAt != nil {
		s.CancelRequestedAt = cancelAt.UTC()
	}
	s.CreatedAt, s.ExpiresAt, s.UpdatedAt = s.CreatedAt.UTC(), s.ExpiresAt.UTC(), s.UpdatedAt.UTC()
	s.Items = make([]order.ItemSnapshot, len(skus))
	for i := range skus {
		s.Items[i] = order.ItemSnapshot{SKU: skus[i], Qty: qtys[i], UnitPrice: prices[i]}
	}
	s.History = make([]order.HistoryEntry, len(hStatuses))
	for i := range hStatuses {
		st, err := order.ParseStatus(hStatuses[i])
		if err != nil {
			return nil, fmt.Errorf("order %s history: %w", s.ID, err)
		}
		s.History[i] = order.HistoryEntry{Status: st, At: hAts[i].UTC(), Reason: hReasons[i]}
	}
	return order.Restore(s)
}

// ListByBuyer implements app.Repository: newest first, keyset-paged on (created_at, id).
func (s *Store) ListByBuyer(ctx context.Context, buyerID, before string, limit int) ([]*order.Order, error) {
	var orders []*order.Order
	var err error
	if before == "" {
		orders, err = query(ctx, s.pool, selectOrders+`WHERE o.buyer_id = $1 ORDER BY o.created_at DESC, o.id DESC LIMIT $2`, buyerID, limit)
	} else {
		orders, err = query(ctx, s.pool, selectOrders+`
			WHERE o.buyer_id = $1
			  AND (o.created_at, o.id) < (SELECT c.created_at, c.id FROM orders c WHERE c.id = $3 AND c.buyer_id = $1)
			ORDER BY o.created_at DESC, o.id DESC LIMIT $2`, buyerID, limit, before)
	}
	if err != nil {
		return nil, fmt.Errorf("list orders of %s: %w", buyerID, err)
	}
	return orders, nil
}

// ListStuck implements app.Repository.
func (s *Store) ListStuck(ctx context.Context, cutoff time.Time, limit int) ([]*order.Order, error) {
	orders, err := query(ctx, s.pool, selectOrders+`WHERE o.status IN ('pending', 'awaiting_payment') AND o.expires_at < $1
		ORDER BY o.expires_at, o.id LIMIT $2`, cutoff, limit)
	if err != nil {
		return nil, fmt.Errorf("list stuck orders: %w", err)
	}
	return orders, nil
}

// OldestRefundPending implements app.Repository: the first refund_pending history entry of
// the orders in refund_pending (an order enters it once: it leaves only to refunded). The
// orders are found through the partial index orders_open, their history by its primary key.
func (s *Store) OldestRefundPending(ctx context.Context) (time.Time, error) {
	var at *time.Time
	err := s.pool.QueryRow(ctx, `SELECT min(h.at) FROM orders o
		JOIN order_history h ON h.order_id = o.id AND h.status = 'refund_pending'
		WHERE o.status = 'refund_pending'`).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("oldest refund_pending order: %w", err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
