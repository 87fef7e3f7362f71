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

// RememberOrders implements app.Store, in one outbox.Batch and one INSERT. Orders are
// inserted in id order, so two batches with orders in common never wait on each other in a
// cycle; of one order given twice, the first total stands.
func (s *Store) RememberOrders(ctx context.Context, ins []inbox.Message, os []payment.OrderTotal) ([]bool, error) {
	units := make([]*outbox.Unit, len(ins))
	for i := range ins {
		units[i] = &outbox.Unit{In: &ins[i]}
	}
	err := outbox.Batch(ctx, s.pool, units, func(tx pgx.Tx, b *pgx.Batch, fresh []int) error {
		var r struct {
			orders, currencies []string
			totals             []int64
			traces             []*string
			deadlines          []*time.Time
		}
		for _, i := range fresh {
			o := os[i]
			r.orders, r.totals, r.currencies = append(r.orders, o.OrderID), append(r.totals, o.Total), append(r.currencies, o.Currency)
			r.traces, r.deadlines = append(r.traces, nullString(o.Traceparent)), append(r.deadlines, nullTime(o.PaymentDeadline))
		}
		b.Queue(`INSERT INTO order_totals (order_id, total, currency, traceparent, payment_deadline)
			SELECT o, t, c, tp, d FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::timestamptz[])
			       WITH ORDINALITY AS x(o, t, c, tp, d, n)
			 ORDER BY o, n -- of one order given twice, the first is stored
			ON CONFLICT (order_id) DO NOTHING`, r.orders, r.totals, r.currencies, r.traces, r.deadlines)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("remember %d orders: %w", len(ins), err)
	}
	dup := make([]bool, len(units))
	for i, u := range units {
		dup[i] = u.Dup
	}
	return dup, nil
}

// RecordPayment implements app.Store. Two concurrent notifications of one transaction
// serialise on the unique (provider, provider_txn_id) index: the second insert waits for the
// first transaction, then inserts nothing, finds the first one's payment (FOR UPDATE) and
// hands it to decide as a stored one.
func (s *Store) RecordPayment(ctx context.Context, provider, txnID, orderID string,
	decide func(o payment.OrderTotal, existing *payment.Payment) (p *payment.Payment, changed bool, msgs []events.Message, err error),
) (p *payment.Payment, created bool, err error) {
	err = outbox.InTxBatch(ctx, s.pool, func(tx pgx.Tx, _ *pgx.Batch) error {
		existing, err := byTxn(ctx, tx, provider, txnID)
		if err != nil && !errors.Is(err, payment.ErrNotFound) {
			return err
		}
		if existing != nil {
			orderID = existing.OrderID()
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
		if existing == nil {
			np, _, msgs, err := decide(o, nil)
			if err != nil {
				return err
			}
			ok, err := insertPayment(ctx, tx, np)
			if err != nil {
				return err
			}
			if ok {
				p, created = np, true
				return outbox.Write(ctx, tx, msgs...)
			}
			// A concurrent notification of the same transaction won: decide again, on it.
			if existing, err = byTxn(ctx, tx, provider, txnID); err != nil {
				return err
			}
		}
		p = existing
		_, changed, msgs, err := decide(o, existing)
		if err != nil || !changed {
			return err
		}
		if err := save(ctx, tx, existing); err != nil {
			return err
		}
		return outbox.Write(ctx, tx, msgs...)
	})
	if err != nil {
		return nil, false, fmt.Errorf("record payment: %w", err)
	}
	return p, created, nil
}

// insertPayment stores the new payment np; created=false when a payment of its provider
// transaction is stored already.
func insertPayment(ctx context.Context, tx pgx.Tx, np *payment.Payment) (created bool, err error) {
	snap := np.Snapshot()
	tag, err := tx.Exec(ctx, `
		INSERT INTO payments (payment_id, provider, provider_txn_id, order_id, amount, currency, status,
		                      failure_reason, created_at, updated_at,
		                      refund_id, provider_refund_id, refund_reason, refunded_at, refund_status,
		                      refund_attempts, refund_next_attempt_at, refund_last_error, refund_requested_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
		ON CONFLICT (provider, provider_txn_id) DO NOTHING`,
		append([]any{snap.ID, snap.Provider, snap.ProviderTxnID, snap.OrderID, snap.Amount, snap.Currency, snap.Status.String(),
			nullString(snap.FailureReason), snap.CreatedAt, snap.UpdatedAt}, refundColumns(snap.Refund)...)...)
	if err != nil {
		return false, fmt.Errorf("insert payment: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// UpdatePayments implements app.Store.
func (s *Store) UpdatePayments(ctx context.Context, in *inbox.Message, sel app.Selector,
	fn func(*payment.Payment) (bool, []events.Message, error)) (duplicate bool, err error) {
	if (sel.PaymentID != "") == (sel.ProviderTxnID != "") || (sel.ProviderTxnID != "") != (sel.Provider != "") {
		return false, errors.New("update payments: select by exactly one of payment id and provider transaction")
	}
	where, args := "payment_id = $1", []any{sel.PaymentID}
	if sel.ProviderTxnID != "" {
		where, args = "provider = $1 AND provider_txn_id = $2", []any{sel.Provider, sel.ProviderTxnID}
	}
	return s.update(ctx, in, where, args, fn, func(ps []*payment.Payment) ([]events.Message, error) {
		if len(ps) == 0 {
			return nil, fmt.Errorf("%w: %s%s", payment.ErrNotFound, sel.PaymentID, sel.ProviderTxnID) // rolls back the claim
		}
		return nil, nil
	})
}

// UpdateOrderPayments implements app.Store.
func (s *Store) UpdateOrderPayments(ctx context.Context, in *inbox.Message, orderID string,
	fn func(*payment.Payment) (bool, []events.Message, error),
	done func([]*payment.Payment) ([]events.Message, error)) (duplicate bool, err error) {
	return s.update(ctx, in, "order_id = $1", []any{orderID}, fn, done)
}

// update claims in, locks the payments where picks, calls fn on each and stores what it
// changed, then done on them all; the messages of both go to the outbox.
func (s *Store) update(ctx context.Context, in *inbox.Message, where string, args []any,
	fn func(*payment.Payment) (bool, []events.Message, error),
	done func([]*payment.Payment) ([]events.Message, error)) (duplicate bool, err error) {
	duplicate, err = outbox.InTx(ctx, s.pool, in, func(tx pgx.Tx) ([]events.Message, error) {
		ps, err := query(ctx, tx, selectPayments+` WHERE `+where+` ORDER BY created_at, payment_id FOR UPDATE`, args...)
		if err != nil {
			return nil, err
		}
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
		m, err := done(ps)
		return append(msgs, m...), err
	})
	if err != nil {
		return false, fmt.Errorf("update payments: %w", err)
	}
	return duplicate, nil
}

// save writes the mutable columns of p: status, refund and re-drives, and the money (a
// declined payment's transaction may succeed later, for the amount it received).
func save(ctx context.Context, tx pgx.Tx, p *payment.Payment) error {
	snap := p.Snapshot()
	_, err := tx.Exec(ctx, `
		UPDATE payments SET status = $2, failure_reason = $3, updated_at = $4,
		       refund_id = $5, provider_refund_id = $6, refund_reason = $7, refunded_at = $8, refund_status = $9,
		       refund_attempts = $10, refund_next_attempt_at = $11, refund_last_error = $12, refund_requested_at = $13,
		       redrives = $14, redriven_at = $15, amount = $16, currency = $17
		 WHERE payment_id = $1`,
		append(append([]any{snap.ID, snap.Status.String(), nullString(snap.FailureReason), snap.UpdatedAt}, refundColumns(snap.Refund)...),
			snap.Redrives, nullTime(snap.RedrivenAt), snap.Amount, snap.Currency)...)
	if err != nil {
		return fmt.Errorf("save payment %s: %w", snap.ID, err)
	}
	return nil
}

// refundColumns are the values of refund_id, provider_refund_id, refund_reason, refunded_at,
// refund_status, refund_attempts, refund_next_attempt_at, refund_last_error and
// refund_requested_at for r (all NULL but the attempts for none).
func refundColumns(r *payment.Refund) []any {
	if r == nil {
		return []any{nil, nil, nil, nil, nil, 0, nil, nil, nil}
	}
	return []any{r.ID, nullString(r.ProviderRefundID), nullString(r.Reason), nullTime(r.At), r.State.String(),
		r.Attempts, nullTime(r.NextAttemptAt), nullString(r.LastError), r.RequestedAt}
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

// ListOpenRefunds implements app.Store.
func (s *Store) ListOpenRefunds(ctx context.Context, requestedBefore time.Time, limit int) ([]*payment.Payment, error) {
	return query(ctx, s.pool, selectPayments+` WHERE refund_status IN ('requested', 'pending') AND refund_requested_at < $1
		ORDER BY refund_requested_at, payment_id LIMIT $2`, requestedBefore, limit)
}

// ListFailedRefunds implements app.Store.
func (s *Store) ListFailedRefunds(ctx context.Context, limit int) ([]*payment.Payment, error) {
	return query(ctx, s.pool, selectPayments+` WHERE refund_status = 'failed' ORDER BY refund_requested_at, payment_id LIMIT $1`, limit)
}

// ListUnpaidOrders implements app.Store.
func (s *Store) ListUnpaidOrders(ctx context.Context, createdBefore, deadlineAfter, createdAfter time.Time, limit int) ([]payment.OrderTotal, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT o.order_id, o.total, o.currency, coalesce(o.traceparent, ''), o.payment_deadline, o.created_at
		  FROM order_totals o
		 WHERE o.created_at < $1
		   AND (o.payment_deadline > $2 OR (o.payment_deadline IS NULL AND o.created_at > $3))
		   AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.order_id AND p.status IN ('succeeded', 'refunded'))
		 ORDER BY o.created_at, o.order_id LIMIT $4`, createdBefore, deadlineAfter, createdAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("list unpaid orders: %w", err)
	}
	orders, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (payment.OrderTotal, error) {
		var o payment.OrderTotal
		var deadline *time.Time
		err := r.Scan(&o.OrderID, &o.Total, &o.Currency, &o.Traceparent, &deadline, &o.CreatedAt)
		o.PaymentDeadline, o.CreatedAt = utc(deadline), o.CreatedAt.UTC()
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("list unpaid orders: %w", err)
	}
	return orders, nil
}

func byTxn(ctx context.Context, q querier, provider, txnID string) (*payment.Payment, error) {
	ps, err := query(ctx, q, selectPayments+` WHERE provider = $1 AND provider_txn_id = $2 FOR UPDATE`, provider, txnID)
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
	       refund_id, coalesce(provider_refund_id, ''), coalesce(refund_reason, ''), refunded_at,
	       refund_status, refund_attempts, refund_next_attempt_at, coalesce(refund_last_error, ''), refund_requested_at,
	       redrives, redriven_at, created_at, updated_at
	  FROM payments`

func query(ctx context.Context, q querier, sql string, args ...any) ([]*payment.Payment, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("query payments: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*payment.Payment, error) {
		var (
			s                                 payment.Snapshot
			status                            string
			refundID, refundStatus            *string
			providerRefundID, rfReason, rfErr string
			refundedAt, nextAt, requestedAt   *time.Time
			redrivenAt                        *time.Time
			attempts                          int
		)
		if err := r.Scan(&s.ID, &s.Provider, &s.ProviderTxnID, &s.OrderID, &s.Amount, &s.Currency, &status, &s.FailureReason,
			&refundID, &providerRefundID, &rfReason, &refundedAt, &refundStatus, &attempts, &nextAt, &rfErr, &requestedAt,
			&s.Redrives, &redrivenAt, &s.CreatedAt, &s.UpdatedAt); err != nil {
			return nil, err
		}
		st, err := payment.ParseStatus(status)
		if err != nil {
			return nil, err
		}
		s.Status = st
		if refundID != nil {
			rf := &payment.Refund{ID: *refundID, ProviderRefundID: providerRefundID, Reason: rfReason, Attempts: attempts,
				LastError: rfErr, At: utc(refundedAt), NextAttemptAt: utc(nextAt), RequestedAt: utc(requestedAt)}
			switch {
			case refundStatus != nil:
				if rf.State, err = payment.ParseRefundState(*refundStatus); err != nil {
					return nil, err
				}
			default: // written by a payment-adapter from before two-step refunds: refunded at once
				rf.State = payment.RefundDone
			}
			if rf.RequestedAt.IsZero() {
				rf.RequestedAt = rf.At
			}
			s.Refund = rf
		}
		s.RedrivenAt, s.CreatedAt, s.UpdatedAt = utc(redrivenAt), s.CreatedAt.UTC(), s.UpdatedAt.UTC()
		return payment.Restore(s), nil
	})
	if err != nil {
		return nil, fmt.Errorf("read payments: %w", err)
	}
	return ps, nil
}

func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
