// Package postgres stores payment-adapter's order totals and payments in PostgreSQL, with the
// migrations that create them, and runs each use case in one transaction together with its
// outbox and inbox rows.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is payment-adapter's own migrations.
var Schema = postgres.MigrationsSchema("payment", migrations)

// Schemas are every schema the payment database needs, in the order to apply them.
func Schemas() []postgres.Schema { return service.Schemas(Schema) }

// Store is the app.Store on PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
}

var _ app.Store = (*Store)(nil)

// New returns a Store on pool, whose database has Schemas applied.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// RememberOrder implements app.Store.
func (s *Store) RememberOrder(ctx context.Context, in inbox.Message, o payment.OrderTotal) (duplicate bool, err error) {
	duplicate, err = outbox.InTx(ctx, s.pool, &in, func(tx pgx.Tx) ([]events.Message, error) {
		_, err := tx.Exec(ctx, `INSERT INTO order_totals (order_id, total, currency, traceparent) VALUES ($1, $2, $3, $4)
			ON CONFLICT (order_id) DO NOTHING`, o.OrderID, o.Total, o.Currency, nullString(o.Traceparent))
		if err != nil {
			return nil, fmt.Errorf("insert order total: %w", err)
		}
		return nil, nil
	})
	if err != nil {
		return false, fmt.Errorf("remember order %s: %w", o.OrderID, err)
	}
	return duplicate, nil
}

// RecordPayment implements app.Store. Two concurrent notifications of one transaction
// serialise on the unique (provider, provider_txn_id) index: the second insert waits for the
// first transaction, then inserts nothing and finds the first one's payment.
func (s *Store) RecordPayment(ctx context.Context, provider, txnID, orderID string,
	decide func(payment.OrderTotal) (*payment.Payment, []events.Message, error)) (p *payment.Payment, created bool, err error) {
	err = postgres.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		existing, err := byTxn(ctx, tx, provider, txnID)
		if err == nil {
			p = existing
			return nil
		}
		if !errors.Is(err, payment.ErrNotFound) {
			return err
		}
		var o payment.OrderTotal
		err = tx.QueryRow(ctx, `SELECT order_id, total, currency, coalesce(traceparent, '') FROM order_totals WHERE order_id = $1`, orderID).
			Scan(&o.OrderID, &o.Total, &o.Currency, &o.Traceparent)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s", payment.ErrOrderUnknown, orderID)
		}
		if err != nil {
			return fmt.Errorf("read order total: %w", err)
		}
		np, msgs, err := decide(o)
		if err != nil {
			return err
		}
		snap := np.Snapshot()
		tag, err := tx.Exec(ctx, `
			INSERT INTO payments (payment_id, provider, provider_txn_id, order_id, amount, currency, status,
			                      failure_reason, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (provider, provider_txn_id) DO NOTHING`,
			snap.ID, snap.Provider, snap.ProviderTxnID, snap.OrderID, snap.Amount, snap.Currency, snap.Status.String(),
			nullString(snap.FailureReason), snap.CreatedAt, snap.UpdatedAt)
		if err != nil {
			return fmt.Errorf("insert payment: %w", err)
		}
		if tag.RowsAffected() == 0 { // a concurrent notification of the same transaction won
			p, err = byTxn(ctx, tx, provider, txnID)
			return err
		}
		if err := outbox.Write(ctx, tx, msgs...); err != nil {
			return err
		}
		p, created = np, true
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("record payment: %w", err)
	}
	return p, created, nil
}

// UpdatePayments implements app.Store.
func (s *Store) UpdatePayments(ctx context.Context, in *inbox.Message, sel app.Selector,
	fn func(*payment.Payment) (bool, []events.Message, error)) (duplicate bool, found int, err error) {
	if (sel.PaymentID == "") == (sel.OrderID == "") {
		return false, 0, errors.New("update payments: select by exactly one of payment id and order id")
	}
	duplicate, err = outbox.InTx(ctx, s.pool, in, func(tx pgx.Tx) ([]events.Message, error) {
		where, arg := "payment_id = $1", sel.PaymentID
		if sel.OrderID != "" {
			where, arg = "order_id = $1", sel.OrderID
		}
		ps, err := query(ctx, tx, selectPayments+` WHERE `+where+` ORDER BY created_at, payment_id FOR UPDATE`, arg)
		if err != nil {
			return nil, err
		}
		if len(ps) == 0 && sel.PaymentID != "" {
			return nil, fmt.Errorf("%w: %s", payment.ErrNotFound, sel.PaymentID) // rolls back the claim
		}
		found = len(ps)
		var msgs []events.Message
		for _, p := range ps {
			changed, m, err := fn(p)
			if err != nil {
				return nil, err
			}
			if changed {
				if err := save(ctx, tx, p); err != nil {
					return nil, err
				}
			}
			msgs = append(msgs, m...)
		}
		return msgs, nil
	})
	if err != nil {
		return false, 0, fmt.Errorf("update payments: %w", err)
	}
	return duplicate, found, nil
}

// save writes the mutable columns of p: status and refund.
func save(ctx context.Context, tx pgx.Tx, p *payment.Payment) error {
	snap := p.Snapshot()
	var refundID, providerRefundID, reason *string
	var at *time.Time
	if r := snap.Refund; r != nil {
		refundID, providerRefundID, reason, at = &r.ID, &r.ProviderRefundID, &r.Reason, &r.At
	}
	_, err := tx.Exec(ctx, `
		UPDATE payments SET status = $2, failure_reason = $3, refund_id = $4, provider_refund_id = $5,
		       refund_reason = $6, refunded_at = $7, updated_at = $8
		 WHERE payment_id = $1`,
		snap.ID, snap.Status.String(), nullString(snap.FailureReason), refundID, providerRefundID, reason, at, snap.UpdatedAt)
	if err != nil {
		return fmt.Errorf("save payment %s: %w", snap.ID, err)
	}
	return nil
}

// Get implements app.Store.
func (s *Store) Get(ctx context.Context, id string) (*payment.Payment, error) {
	ps, err := query(ctx, s.pool, selectPayments+` WHERE payment_id = $1`, id)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%w: %s", payment.ErrNotFound, id)
	}
	return ps[0], nil
}

// ListByOrder implements app.Store.
func (s *Store) ListByOrder(ctx context.Context, orderID string) ([]*payment.Payment, error) {
	return query(ctx, s.pool, selectPayments+` WHERE order_id = $1 ORDER BY created_at, payment_id`, orderID)
}

// ListSucceeded implements app.Store.
func (s *Store) ListSucceeded(ctx context.Context, from, to time.Time, limit int) ([]*payment.Payment, error) {
	return query(ctx, s.pool, selectPayments+` WHERE status = 'succeeded' AND created_at >= $1 AND created_at < $2
		ORDER BY created_at, payment_id LIMIT $3`, from, to, limit)
}

func byTxn(ctx context.Context, q querier, provider, txnID string) (*payment.Payment, error) {
	ps, err := query(ctx, q, selectPayments+` WHERE provider = $1 AND provider_txn_id = $2`, provider, txnID)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%w: %s/%s", payment.ErrNotFound, provider, txnID)
	}
	return ps[0], nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const selectPayments = `
	SELECT payment_id, provider, provider_txn_id, order_id, amount, currency, status, coalesce(failure_reason, ''),
	       refund_id, coalesce(provider_refund_id, ''), coalesce(refund_reason, ''), refunded_at, created_at, updated_at
	  FROM payments`

func query(ctx context.Context, q querier, sql string, args ...any) ([]*payment.Payment, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("query payments: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*payment.Payment, error) {
		var (
			s                          payment.Snapshot
			status                     string
			refundID                   *string
			providerRefundID, rfReason string
			refundedAt                 *time.Time
		)
		if err := r.Scan(&s.ID, &s.Provider, &s.ProviderTxnID, &s.OrderID, &s.Amount, &s.Currency, &status, &s.FailureReason,
			&refundID, &providerRefundID, &rfReason, &refundedAt, &s.CreatedAt, &s.UpdatedAt); err != nil {
			return nil, err
		}
		st, err := payment.ParseStatus(status)
		if err != nil {
			return nil, err
		}
		s.Status = st
		if refundID != nil && refundedAt != nil {
			s.Refund = &payment.Refund{ID: *refundID, ProviderRefundID: providerRefundID, Reason: rfReason, At: refundedAt.UTC()}
		}
		s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
		return payment.Restore(s), nil
	})
	if err != nil {
		return nil, fmt.Errorf("read payments: %w", err)
	}
	return ps, nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
