// Package postgres stores stock in PostgreSQL: the SKU summary, lock rows and the append-only
// ledger. Every movement is one conditional UPDATE of the summary joined with the INSERT of its
// ledger row in a single statement — the check and the write are never apart.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the stock service's own migrations.
var Schema = postgres.MigrationsSchema("stock", migrations)

// Store is the stock database.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool returns the underlying pool (for health checks).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Tx is one unit of work: every method runs inside the same database transaction.
type Tx struct{ tx pgx.Tx }

// PgxTx exposes the transaction to the shared outbox and inbox writers.
func (t *Tx) PgxTx() pgx.Tx { return t.tx }

// InTx runs fn in one transaction, committed when fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(*Tx) error) error {
	return postgres.InTx(ctx, s.pool, func(tx pgx.Tx) error { return fn(&Tx{tx: tx}) })
}

// querier is what a movement runs on: the transaction or a savepoint inside it.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// moveSQL applies a movement and appends its ledger row in one statement. The WHERE clause is
// the conditional update of DESIGN §3 generalised to every figure: no row comes back when the
// movement does not fit (or the SKU does not exist), and then nothing was written.
const moveSQL = `
WITH moved AS (
    UPDATE sku_stock
       SET on_hand = on_hand + $2, locked = locked + $3, sold = sold + $4, incoming = incoming + $5,
           available = available + $2 - $3 - $4, updated_at = now()
     WHERE sku = $1
       AND available + $2 - $3 - $4 >= 0 AND on_hand + $2 >= 0 AND locked + $3 >= 0
       AND sold + $4 >= 0 AND incoming + $5 >= 0
 RETURNING sku, on_hand, locked, sold, incoming)
INSERT INTO stock_ledger (sku, change_type, qty,
       on_hand_before, locked_before, sold_before, incoming_before,
       on_hand_after, locked_after, sold_after, incoming_after,
       order_id, operator, remark, idempotency_key)
SELECT sku, $6, $7, on_hand - $2, locked - $3, sold - $4, incoming - $5,
       on_hand, locked, sold, incoming, $8, $9, $10, $11
  FROM moved
RETURNING id, created_at, on_hand_after, locked_after, sold_after, incoming_after`

// apply makes one movement. It returns ErrUnknownSKU or ErrInsufficientStock (wrapped with
// the SKU) when the movement cannot be made; nothing is written then.
func apply(ctx context.Context, q querier, m stock.Movement, operator, key string) (stock.LedgerEntry, error) {
	d := m.Delta
	e := stock.LedgerEntry{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), OrderID: m.OrderID, Operator: operator, Remark: m.Remark, IdempotencyKey: key}
	err := q.QueryRow(ctx, moveSQL, m.SKU, d.OnHand, d.Locked, d.Sold, d.Incoming,
		string(m.Type), m.Qty.Int64(), nullable(m.OrderID), operator, m.Remark, key).
		Scan(&e.ID, &e.CreatedAt, &e.After.OnHand, &e.After.Locked, &e.After.Sold, &e.After.Incoming)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sku_stock WHERE sku = $1)`, m.SKU).Scan(&exists); err != nil {
			return e, fmt.Errorf("%s %s: %w", m.Type, m.SKU, err)
		}
		merr := &stock.MovementError{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), Err: stock.ErrInsufficientStock}
		if !exists {
			merr.Err = stock.ErrUnknownSKU
		}
		return e, merr
	}
	if err != nil {
		return e, fmt.Errorf("%s %s: %w", m.Type, m.SKU, err)
	}
	e.Before = e.After.Minus(d)
	return e, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// orderKey is the idempotency key of a movement tied to an order: one per (order, SKU, type).
func orderKey(m stock.Movement) string { return m.OrderID + "/" + m.SKU + "/" + string(m.Type) }

// applyAll makes every movement or none: with more than one, a savepoint undoes the ones
// already made when a later one does not fit, and the transaction stays usable.
func applyAll(ctx context.Context, tx pgx.Tx, ms []stock.Movement, operator string) ([]stock.LedgerEntry, error) {
	var q querier = tx
	var sp pgx.Tx
	if len(ms) > 1 {
		var err error
		if sp, err = tx.Begin(ctx); err != nil {
			return nil, fmt.Errorf("savepoint: %w", err)
		}
		q = sp
	}
	entries := make([]stock.LedgerEntry, 0, len(ms))
	for _, m := range ms {
		e, err := apply(ctx, q, m, operator, orderKey(m))
		if err != nil {
			if sp != nil {
				if rbErr := sp.Rollback(ctx); rbErr != nil {
					return nil, errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rbErr))
				}
			}
			return nil, err
		}
		entries = append(entries, e)
	}
	if sp != nil {
		if err := sp.Commit(ctx); err != nil {
			return nil, fmt.Errorf("release savepoint: %w", err)
		}
	}
	return entries, nil
}

// CreateSKU adds a SKU; a positive onHand is recorded as the opening stocktake row.
// It returns ErrSKUExists when the SKU is already there.
func (t *Tx) CreateSKU(ctx context.Context, sku string, onHand int64, operator string) (stock.SKUStock, error) {
	if err := stock.ValidSKU(sku); err != nil {
		return stock.SKUStock{}, err
	}
	tag, err := t.tx.Exec(ctx, `INSERT INTO sku_stock (sku) VALUES ($1) ON CONFLICT (sku) DO NOTHING`, sku)
	if err != nil {
		return stock.SKUStock{}, fmt.Errorf("create sku %s: %w", sku, err)
	}
	if tag.RowsAffected() == 0 {
		return stock.SKUStock{}, fmt.Errorf("create sku %s: %w", sku, stock.ErrSKUExists)
	}
	if onHand > 0 {
		m, _, err := stock.OnHandMovement(sku, stock.ChangeStocktake, onHand)
		if err != nil {
			return stock.SKUStock{}, err
		}
		m.Remark = "opening balance"
		if _, err := apply(ctx, t.tx, m, operator, "opening/"+sku); err != nil {
			return stock.SKUStock{}, err
		}
	}
	return getSKU(ctx, t.tx, sku, "")
}

// LockResult is the outcome of an order's lock request.
type LockResult struct {
	OrderID   string
	Locked    bool
	Reason    string // why it was rejected: insufficient_stock | unknown_sku
	SKU       string // the first line that did not fit
	Lines     []stock.Line
	Deadline  time.Time
	Duplicate bool // the order had been seen: this is the first outcome, nothing changed now
}

// Rejection reasons recorded for an order whose lines could not all be locked.
const (
	RejectInsufficient = "insufficient_stock"
	RejectUnknownSKU   = "unknown_sku"
	RejectInvalidOrder = "invalid_order" // lines stock cannot parse (bad SKU, quantity out of range)
)

// LockOrder locks every line of an order or none. Lines must be normalized (stock.NormalizeLines:
// merged and sorted by SKU, the fixed order that rules out deadlocks). An order seen before
// returns its first outcome with Duplicate set. A rejection is an outcome, not an error.
func (t *Tx) LockOrder(ctx context.Context, orderID string, lines []stock.Line, deadline time.Time, operator string) (LockResult, error) {
	res := LockResult{OrderID: orderID, Lines: lines, Deadline: deadline}
	// Claim the order first: a concurrent request for the same order waits here for this one
	// to commit and then reads its outcome.
	tag, err := t.tx.Exec(ctx, `INSERT INTO order_lock (order_id, outcome, deadline) VALUES ($1, 'locked', $2) ON CONFLICT (order_id) DO NOTHING`, orderID, deadline)
	if err != nil {
		return res, fmt.Errorf("lock order %s: %w", orderID, err)
	}
	if tag.RowsAffected() == 0 {
		return t.lockOutcome(ctx, orderID)
	}
	ms := make([]stock.Movement, len(lines))
	for i, l := range lines {
		ms[i] = stock.LockMovement(orderID, l.SKU, l.Qty)
	}
	if _, err := applyAll(ctx, t.tx, ms, operator); err != nil {
		switch {
		case errors.Is(err, stock.ErrInsufficientStock):
			res.Reason = RejectInsufficient
		case errors.Is(err, stock.ErrUnknownSKU):
			res.Reason = RejectUnknownSKU
		default:
			return res, fmt.Errorf("lock order %s: %w", orderID, err)
		}
		var merr *stock.MovementError
		if errors.As(err, &merr) {
			res.SKU = merr.SKU
		}
		_, err := t.tx.Exec(ctx, `UPDATE order_lock SET outcome = 'rejected', reject_reason = $2, reject_sku = $3 WHERE order_id = $1`, orderID, res.Reason, res.SKU)
		if err != nil {
			return res, fmt.Errorf("record rejection of %s: %w", orderID, err)
		}
		return res, nil
	}
	skus, qtys := columns(lines)
	_, err = t.tx.Exec(ctx, `INSERT INTO stock_lock (order_id, sku, qty, state, deadline)
		SELECT $1, u.sku, u.qty, 'locked', $4 FROM unnest($2::text[], $3::bigint[]) AS u(sku, qty)`, orderID, skus, qtys, deadline)
	if err != nil {
		return res, fmt.Errorf("insert locks of %s: %w", orderID, err)
	}
	res.Locked = true
	return res, nil
}

func columns(lines []stock.Line) ([]string, []int64) {
	skus := make([]string, len(lines))
	qtys := make([]int64, len(lines))
	for i, l := range lines {
		skus[i], qtys[i] = l.SKU, l.Qty.Int64()
	}
	return skus, qtys
}

// lockOutcome reads the first outcome recorded for an order.
func (t *Tx) lockOutcome(ctx context.Context, orderID string) (LockResult, error) {
	res := LockResult{OrderID: orderID, Duplicate: true}
	var outcome string
	var reason, sku *string
	err := t.tx.QueryRow(ctx, `SELECT outcome, reject_reason, reject_sku, deadline FROM order_lock WHERE order_id = $1`, orderID).
		Scan(&outcome, &reason, &sku, &res.Deadline)
	if err != nil {
		return res, fmt.Errorf("read outcome of %s: %w", orderID, err)
	}
	res.Locked = outcome == "locked"
	if reason != nil {
		res.Reason = *reason
	}
	if sku != nil {
		res.SKU = *sku
	}
	locks, err := locksOf(ctx, t.tx, orderID, false)
	if err != nil {
		return res, err
	}
	for _, l := range locks {
		res.Lines = append(res.Lines, stock.Line{SKU: l.SKU(), Qty: l.Qty()})
	}
	return res, nil
}

func locksOf(ctx context.Context, q querier, orderID string, forUpdate bool) ([]*stock.Lock, error) {
	sql := `SELECT sku, qty, state, deadline FROM stock_lock WHERE order_id = $1 ORDER BY sku`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, orderID)
	if err != nil {
		return nil, fmt.Errorf("read locks of %s: %w", orderID, err)
	}
	var locks []*stock.Lock
	for rows.Next() {
		var sku, state string
		var qty int64
		var deadline time.Time
		if err := rows.Scan(&sku, &qty, &state, &deadline); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read locks of %s: %w", orderID, err)
		}
		l, err := stock.RestoreLock(orderID, sku, qty, stock.LockState(state), deadline)
		if err != nil {
			rows.Close()
			return nil, err
		}
		locks = append(locks, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read locks of %s: %w", orderID, err)
	}
	return locks, nil
}

// UpdateLocks is the one way an order's locks change: it takes the order's lock rows FOR
// UPDATE (in SKU order), lets fn transition them and say which movements that makes, applies
// those movements all or none, and stores the new states. It returns ErrNoLock when the order
// holds no lock rows; errors from fn are returned as they are and nothing changes.
func (t *Tx) UpdateLocks(ctx context.Context, orderID, operator string, fn func([]*stock.Lock) ([]stock.Movement, error)) ([]stock.LedgerEntry, error) {
	locks, err := locksOf(ctx, t.tx, orderID, true)
	if err != nil {
		return nil, err
	}
	if len(locks) == 0 {
		var seen bool
		if err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM order_lock WHERE order_id = $1)`, orderID).Scan(&seen); err != nil {
			return nil, fmt.Errorf("order %s: %w", orderID, err)
		}
		if !seen {
			return nil, fmt.Errorf("order %s: %w (%w)", orderID, stock.ErrNoLock, stock.ErrOrderUnknown)
		}
		return nil, fmt.Errorf("order %s: %w", orderID, stock.ErrNoLock)
	}
	ms, err := fn(locks)
	if err != nil {
		return nil, err
	}
	entries, err := applyAll(ctx, t.tx, ms, operator)
	if err != nil {
		return nil, err
	}
	skus := make([]string, len(locks))
	states := make([]string, len(locks))
	for i, l := range locks {
		skus[i], states[i] = l.SKU(), string(l.State())
	}
	_, err = t.tx.Exec(ctx, `UPDATE stock_lock SET state = u.state, resolved_at = coalesce(resolved_at, now())
		FROM unnest($2::text[], $3::text[]) AS u(sku, state)
		WHERE stock_lock.order_id = $1 AND stock_lock.sku = u.sku AND stock_lock.state <> u.state`, orderID, skus, states)
	if err != nil {
		return nil, fmt.Errorf("store lock states of %s: %w", orderID, err)
	}
	return entries, nil
}

// PaidBy returns the payment recorded as having sold an order's locks ("" when none).
func (t *Tx) PaidBy(ctx context.Context, orderID string) (string, error) {
	var id *string
	err := t.tx.QueryRow(ctx, `SELECT payment_id FROM order_lock WHERE order_id = $1`, orderID).Scan(&id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("read payment of %s: %w", orderID, err)
	}
	if id == nil {
		return "", nil
	}
	return *id, nil
}

// RecordPayment stores the payment that sold an order's locks.
func (t *Tx) RecordPayment(ctx context.Context, orderID, paymentID string) error {
	_, err := t.tx.Exec(ctx, `UPDATE order_lock SET payment_id = $2 WHERE order_id = $1`, orderID, paymentID)
	if err != nil {
		return fmt.Errorf("record payment of %s: %w", orderID, err)
	}
	return nil
}

// Move makes one movement not tied to an order (purchases, adjustments) under the caller's
// idempotency key: the same key again returns the first entry with duplicate=true, and the
// same key for a different movement returns ErrIdempotencyReuse.
func (t *Tx) Move(ctx context.Context, m stock.Movement, operator, key string) (e stock.LedgerEntry, duplicate bool, err error) {
	key = string(m.Type) + ":" + key
	// Serialise requests carrying the same key, so the check below cannot race.
	if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key); err != nil {
		return e, false, fmt.Errorf("%s %s: %w", m.Type, m.SKU, err)
	}
	first, err := ledgerByKey(ctx, t.tx, key)
	switch {
	case err == nil:
		if first.SKU != m.SKU || first.Qty != m.Qty.Int64() {
			return first, true, fmt.Errorf("%w: key %q", stock.ErrIdempotencyReuse, key)
		}
		return first, true, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return e, false, err
	}
	e, err = apply(ctx, t.tx, m, operator, key)
	return e, false, err
}

const ledgerColumns = `id, sku, change_type, qty, on_hand_before, locked_before, sold_before, incoming_before,
	on_hand_after, locked_after, sold_after, incoming_after, coalesce(order_id, ''), operator, remark, idempotency_key, created_at`

func scanLedger(row pgx.Row) (stock.LedgerEntry, error) {
	var e stock.LedgerEntry
	var t string
	err := row.Scan(&e.ID, &e.SKU, &t, &e.Qty, &e.Before.OnHand, &e.Before.Locked, &e.Before.Sold, &e.Before.Incoming,
		&e.After.OnHand, &e.After.Locked, &e.After.Sold, &e.After.Incoming, &e.OrderID, &e.Operator, &e.Remark, &e.IdempotencyKey, &e.CreatedAt)
	e.Type = stock.ChangeType(t)
	return e, err
}

func ledgerByKey(ctx context.Context, q querier, key string) (stock.LedgerEntry, error) {
	return scanLedger(q.QueryRow(ctx, `SELECT `+ledgerColumns+` FROM stock_ledger WHERE idempotency_key = $1`, key))
}

// GetSKU reads a SKU's summary; ErrUnknownSKU when there is none.
func (s *Store) GetSKU(ctx context.Context, sku string) (stock.SKUStock, error) {
	return getSKU(ctx, s.pool, sku, "")
}

func getSKU(ctx context.Context, q querier, sku, suffix string) (stock.SKUStock, error) {
	st := stock.SKUStock{SKU: sku}
	err := q.QueryRow(ctx, `SELECT on_hand, locked, sold, incoming, updated_at FROM sku_stock WHERE sku = $1`+suffix, sku).
		Scan(&st.OnHand, &st.Locked, &st.Sold, &st.Incoming, &st.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("sku %s: %w", sku, stock.ErrUnknownSKU)
	}
	if err != nil {
		return st, fmt.Errorf("read sku %s: %w", sku, err)
	}
	return st, nil
}

// Ledger returns up to limit rows of a SKU's ledger with id > after, oldest first.
func (s *Store) Ledger(ctx context.Context, sku string, after int64, limit int) ([]stock.LedgerEntry, error) {
	if _, err := s.GetSKU(ctx, sku); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+ledgerColumns+` FROM stock_ledger WHERE sku = $1 AND id > $2 ORDER BY id LIMIT $3`, sku, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read ledger of %s: %w", sku, err)
	}
	defer rows.Close()
	var out []stock.LedgerEntry
	for rows.Next() {
		e, err := scanLedger(rows)
		if err != nil {
			return nil, fmt.Errorf("read ledger of %s: %w", sku, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Locks returns the lock rows of an order (none when it holds no lock).
func (s *Store) Locks(ctx context.Context, orderID string) ([]*stock.Lock, error) {
	return locksOf(ctx, s.pool, orderID, false)
}

// RequestAdjustment stores a pending adjustment order.
func (t *Tx) RequestAdjustment(ctx context.Context, a stock.Adjustment) (stock.Adjustment, error) {
	if _, err := getSKU(ctx, t.tx, a.SKU, ""); err != nil {
		return a, err
	}
	err := t.tx.QueryRow(ctx, `INSERT INTO adjustment (sku, kind, delta, counted, reason, requested_by)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, created_at`,
		a.SKU, string(a.Kind), a.Delta, a.Counted, a.Reason, a.RequestedBy).Scan(&a.ID, &a.CreatedAt)
	if err != nil {
		return a, fmt.Errorf("request adjustment of %s: %w", a.SKU, err)
	}
	return a, nil
}

// DecideAdjustment approves or rejects a pending adjustment. Approval applies its movement
// (ErrInsufficientStock when on_hand would drop below what is locked and sold).
func (t *Tx) DecideAdjustment(ctx context.Context, id int64, approve bool, by string) (stock.Adjustment, error) {
	a, err := getAdjustment(ctx, t.tx, id, " FOR UPDATE")
	if err != nil {
		return a, err
	}
	if err := a.Decide(by); err != nil {
		return a, err
	}
	a.State, a.DecidedBy = stock.AdjustmentRejected, by
	if approve {
		a.State = stock.AdjustmentApproved
		cur, err := getSKU(ctx, t.tx, a.SKU, " FOR UPDATE")
		if err != nil {
			return a, err
		}
		m, ok, err := a.Movement(cur.Quantities)
		if err != nil {
			return a, err
		}
		if ok {
			e, err := apply(ctx, t.tx, m, by, fmt.Sprintf("adjustment/%d", id))
			if err != nil {
				return a, err
			}
			a.LedgerID = &e.ID
		}
	}
	_, err = t.tx.Exec(ctx, `UPDATE adjustment SET state = $2, decided_by = $3, decided_at = now(), ledger_id = $4 WHERE id = $1`,
		id, string(a.State), by, a.LedgerID)
	if err != nil {
		return a, fmt.Errorf("decide adjustment %d: %w", id, err)
	}
	return a, nil
}

// GetAdjustment reads an adjustment; ErrAdjustmentNotFound when there is none.
func (s *Store) GetAdjustment(ctx context.Context, id int64) (stock.Adjustment, error) {
	return getAdjustment(ctx, s.pool, id, "")
}

func getAdjustment(ctx context.Context, q querier, id int64, suffix string) (stock.Adjustment, error) {
	a := stock.Adjustment{ID: id}
	var kind, state string
	var decidedBy *string
	err := q.QueryRow(ctx, `SELECT sku, kind, delta, counted, reason, requested_by, state, decided_by, ledger_id, created_at
		FROM adjustment WHERE id = $1`+suffix, id).
		Scan(&a.SKU, &kind, &a.Delta, &a.Counted, &a.Reason, &a.RequestedBy, &state, &decidedBy, &a.LedgerID, &a.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("adjustment %d: %w", id, stock.ErrAdjustmentNotFound)
	}
	if err != nil {
		return a, fmt.Errorf("read adjustment %d: %w", id, err)
	}
	a.Kind, a.State = stock.ChangeType(kind), stock.AdjustmentState(state)
	if decidedBy != nil {
		a.DecidedBy = *decidedBy
	}
	return a, nil
}

// OverdueLocks counts the locks still held whose deadline is before cutoff and returns the
// orders of up to limit of them, oldest deadline first.
func (s *Store) OverdueLocks(ctx context.Context, cutoff time.Time, limit int) (int, []string, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM stock_lock WHERE state = 'locked' AND deadline < $1`, cutoff).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("count overdue locks: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT order_id, min(deadline) FROM stock_lock WHERE state = 'locked' AND deadline < $1
		GROUP BY order_id ORDER BY min(deadline) LIMIT $2`, cutoff, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("list overdue locks: %w", err)
	}
	defer rows.Close()
	var orders []string
	for rows.Next() {
		var id string
		var d time.Time
		if err := rows.Scan(&id, &d); err != nil {
			return 0, nil, fmt.Errorf("list overdue locks: %w", err)
		}
		orders = append(orders, id)
	}
	return n, orders, rows.Err()
}
