// Package postgres stores the timeout service's deadlines in PostgreSQL, with the migrations
// that create them, and runs each use case in one transaction together with its outbox and
// inbox rows.
package postgres

import (
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
	"github.com/stockflow/stockflow/services/timeout/internal/app"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the timeout service's own migrations.
var Schema = postgres.MigrationsSchema("timeout", migrations)

// Schemas are every schema the timeout database needs, in the order to apply them.
func Schemas() []postgres.Schema { return service.Schemas(Schema) }

// Store is the app.Store on PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
}

var _ app.Store = (*Store)(nil)

// New returns a Store on pool, whose database has Schemas applied.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Within implements app.Store.
func (s *Store) Within(ctx context.Context, in *inbox.Message, fn func(app.Tx) ([]events.Message, error)) (duplicate bool, err error) {
	duplicate, err = outbox.InTx(ctx, s.pool, in, func(tx pgx.Tx) ([]events.Message, error) { return fn(txStore{tx}) })
	if err != nil {
		return false, fmt.Errorf("deadline tx: %w", err)
	}
	return duplicate, nil
}

// Batch implements app.Store.
func (s *Store) Batch(ctx context.Context, units []*outbox.Unit, fn func(app.Tx, []int) error) error {
	err := outbox.Batch(ctx, s.pool, units, func(tx pgx.Tx, _ *pgx.Batch, fresh []int) error { return fn(txStore{tx}, fresh) })
	if err != nil {
		return fmt.Errorf("deadline batch of %d: %w", len(units), err)
	}
	return nil
}

// Get implements app.Store.
func (s *Store) Get(ctx context.Context, orderID string) (*deadline.Deadline, error) {
	ds, err := query(ctx, s.pool, selectDeadlines+` WHERE order_id = $1`, orderID)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("%w: %s", deadline.ErrNotFound, orderID)
	}
	return ds[0], nil
}

// txStore is app.Tx in one pgx transaction.
type txStore struct{ tx pgx.Tx }

// Insert implements app.Tx, in one statement. ON CONFLICT DO NOTHING waits for a concurrent
// transaction inserting the same order and then inserts nothing if that one committed.
func (t txStore) Insert(ctx context.Context, ds []app.Traced) ([]bool, error) {
	var r struct {
		orders, states      []string
		resolutions, traces []*string
		ats                 []*time.Time
		created, updated    []time.Time
	}
	for _, d := range ds {
		s := d.Snapshot()
		r.orders, r.ats, r.states = append(r.orders, s.OrderID), append(r.ats, nullTime(s.At)), append(r.states, s.State.String())
		r.resolutions, r.traces = append(r.resolutions, nullString(s.Resolution)), append(r.traces, nullString(d.Traceparent))
		r.created, r.updated = append(r.created, s.CreatedAt), append(r.updated, s.UpdatedAt)
	}
	rows, err := t.tx.Query(ctx, `
		INSERT INTO deadlines (order_id, deadline, state, resolution, created_at, updated_at, traceparent)
		SELECT o, d, s, r, c, u, t
		  FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[])
		       WITH ORDINALITY AS x(o, d, s, r, c, u, t, n)
		 ORDER BY o, n -- batches with orders in common wait in one order, never in a cycle; of one order, the first given is stored
		ON CONFLICT (order_id) DO NOTHING RETURNING order_id`,
		r.orders, r.ats, r.states, r.resolutions, r.created, r.updated, r.traces)
	if err != nil {
		return nil, fmt.Errorf("insert %d deadlines: %w", len(ds), err)
	}
	stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("insert %d deadlines: %w", len(ds), err)
	}
	now := make(map[string]bool, len(stored))
	for _, id := range stored {
		now[id] = true
	}
	inserted := make([]bool, len(ds))
	for i, d := range ds {
		inserted[i] = now[d.OrderID()]
		delete(now, d.OrderID()) // the same order again later in ds was not stored
	}
	return inserted, nil
}

// Lock implements app.Tx.
func (t txStore) Lock(ctx context.Context, orderIDs []string) (map[string]*deadline.Deadline, error) {
	ds, err := query(ctx, t.tx, selectDeadlines+` WHERE order_id = ANY($1) ORDER BY order_id FOR UPDATE`, orderIDs)
	if err != nil {
		return nil, err
	}
	locked := make(map[string]*deadline.Deadline, len(ds))
	for _, d := range ds {
		locked[d.OrderID()] = d
	}
	return locked, nil
}

// LockDue implements app.Tx. SKIP LOCKED lets sweepers of several replicas, and fire
// handlers holding a row, work side by side without waiting on each other.
func (t txStore) LockDue(ctx context.Context, now time.Time, limit int) ([]app.Traced, error) {
	ds, traces, err := queryTraced(ctx, t.tx, selectDeadlines+`
		WHERE state = 'scheduled' AND deadline <= $1
		ORDER BY deadline, order_id
		LIMIT $2
		FOR UPDATE SKIP LOCKED`, now, limit)
	due := make([]app.Traced, len(ds))
	for i, d := range ds {
		due[i] = app.Traced{Deadline: d, Traceparent: traces[i]}
	}
	return due, err
}

// Save implements app.Tx.
func (t txStore) Save(ctx context.Context, ds []*deadline.Deadline) error {
	if len(ds) == 0 {
		return nil
	}
	var orders, states []string
	var resolutions []*string
	var updated []time.Time
	for _, d := range ds {
		s := d.Snapshot()
		orders, states = append(orders, s.OrderID), append(states, s.State.String())
		resolutions, updated = append(resolutions, nullString(s.Resolution)), append(updated, s.UpdatedAt)
	}
	_, err := t.tx.Exec(ctx, `UPDATE deadlines d SET state = u.state, resolution = u.resolution, updated_at = u.updated_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS u(order_id, state, resolution, updated_at)
		WHERE d.order_id = u.order_id`, orders, states, resolutions, updated)
	if err != nil {
		return fmt.Errorf("save %d deadlines: %w", len(ds), err)
	}
	return nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const selectDeadlines = `SELECT order_id, deadline, state, coalesce(resolution, ''), created_at, updated_at, coalesce(traceparent, '') FROM deadlines`

func query(ctx context.Context, q querier, sql string, args ...any) ([]*deadline.Deadline, error) {
	ds, _, err := queryTraced(ctx, q, sql, args...)
	return ds, err
}

// queryTraced is query that also returns each deadline's stored traceparent.
func queryTraced(ctx context.Context, q querier, sql string, args ...any) ([]*deadline.Deadline, []string, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("query deadlines: %w", err)
	}
	var traces []string
	ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*deadline.Deadline, error) {
		var s deadline.Snapshot
		var at *time.Time
		var state, trace string
		if err := r.Scan(&s.OrderID, &at, &state, &s.Resolution, &s.CreatedAt, &s.UpdatedAt, &trace); err != nil {
			return nil, err
		}
		traces = append(traces, trace)
		st, err := deadline.ParseState(state)
		if err != nil {
			return nil, err
		}
		s.State = st
		if at != nil {
			s.At = at.UTC()
		}
		s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
		return deadline.Restore(s), nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read deadlines: %w", err)
	}
	return ds, traces, nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
