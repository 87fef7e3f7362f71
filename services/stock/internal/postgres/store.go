// Package postgres stores stock in PostgreSQL and implements the use cases' port (app.Store,
// app.Tx): the SKU summary split into slot rows, lock rows, the append-only ledger and the
// adjustment orders. A batch of movements first locks the slot rows it needs (SELECT … FOR
// UPDATE, in an order that cannot deadlock), then lets the domain decide in Go, over the
// figures it read, where each movement goes and whether it fits (stock.Slots), and finally
// writes one guarded UPDATE of the summaries — the same non-negative checks again, so that a
// summary changed under a row lock fails the batch instead of going negative — and one INSERT
// of the ledger rows. Writes nobody waits for are staged and go in the transaction's last round
// trip, with the COMMIT (a batch's with its outbox rows: outbox.Batch).
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

	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the stock service's own migrations.
var Schema = postgres.MigrationsSchema("stock", migrations)

// Store is the stock database.
type Store struct{ pool *pgxpool.Pool }

var (
	_ app.Store = (*Store)(nil)
	_ app.Tx    = (*Tx)(nil)
)

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Tx is one unit of work: every method runs inside the same database transaction. Writes
// whose results nothing waits for are staged and sent in one round trip with the commit.
type Tx struct {
	tx     pgx.Tx
	staged *pgx.Batch
}

// flush sends the staged writes now, for a read that must see them.
func (t *Tx) flush(ctx context.Context) error {
	if t.staged.Len() == 0 {
		return nil
	}
	err := t.tx.SendBatch(ctx, t.staged).Close()
	*t.staged = pgx.Batch{}
	if err != nil {
		return fmt.Errorf("staged writes: %w", err)
	}
	return nil
}

// InTx runs fn in one transaction, committed when fn returns nil: the staged writes go with
// the COMMIT.
func (s *Store) InTx(ctx context.Context, fn func(app.Tx) error) error {
	return refused(postgres.InTxBatch(ctx, s.pool, func(tx pgx.Tx, last *pgx.Batch) error {
		return fn(&Tx{tx: tx, staged: last})
	}))
}

// InBatch runs units in one transaction of outbox.Batch: fn's staged writes go in the round
// trip that withdraws the failed units' claims, writes the outbox and commits.
func (s *Store) InBatch(ctx context.Context, units []*outbox.Unit, fn func(tx app.Tx, fresh []int) error) error {
	return refused(outbox.Batch(ctx, s.pool, units, func(tx pgx.Tx, b *pgx.Batch, fresh []int) error {
		return fn(&Tx{tx: tx, staged: b}, fresh)
	}))
}

// querier is what a movement runs on: the transaction or a savepoint inside it.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// CreateSKU adds a SKU; a positive onHand is recorded as the opening stocktake row.
// It returns ErrSKUExists when the SKU is already there.
func (t *Tx) CreateSKU(ctx context.Context, sku string, onHand int64, operator string) (stock.SKUStock, error) {
	if err := stock.ValidSKU(sku); err != nil {
		return stock.SKUStock{}, err
	}
	tag, err := t.tx.Exec(ctx, `INSERT INTO sku (sku) VALUES ($1) ON CONFLICT (sku) DO NOTHING`, sku)
	if err != nil {
		return stock.SKUStock{}, fmt.Errorf("create sku %s: %w", sku, err)
	}
	if tag.RowsAffected() == 0 {
		return stock.SKUStock{}, fmt.Errorf("create sku %s: %w", sku, stock.ErrSKUExists)
	}
	if _, err := t.tx.Exec(ctx, `INSERT INTO sku_stock (sku, slot) VALUES ($1, 0)`, sku); err != nil {
		return stock.SKUStock{}, fmt.Errorf("create sku %s: %w", sku, err)
	}
	if onHand > 0 {
		m, _, err := stock.OnHandMovement(sku, stock.ChangeStocktake, onHand)
		if err != nil {
			return stock.SKUStock{}, err
		}
		m.Remark = "opening balance"
		if _, err := t.moveOne(ctx, stock.SlotMove{Movement: m, Slot: -1, Key: "opening/" + sku}, operator); err != nil {
			return stock.SKUStock{}, err
		}
	}
	return getSKU(ctx, t.tx, sku, false)
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
	e, err = t.moveOne(ctx, stock.SlotMove{Movement: m, Slot: stock.ArrivalSlot(m), Key: key}, operator)
	return e, false, err
}

const ledgerColumns = `id, sku, slot, change_type, qty, on_hand_before, locked_before, sold_before, incoming_before,
	on_hand_after, locked_after, sold_after, incoming_after, coalesce(order_id, ''), operator, remark, idempotency_key, created_at`

func scanLedger(row pgx.Row) (stock.LedgerEntry, error) {
	var e stock.LedgerEntry
	var t string
	err := row.Scan(&e.ID, &e.SKU, &e.Slot, &t, &e.Qty, &e.Before.OnHand, &e.Before.Locked, &e.Before.Sold, &e.Before.Incoming,
		&e.After.OnHand, &e.After.Locked, &e.After.Sold, &e.After.Incoming, &e.OrderID, &e.Operator, &e.Remark, &e.IdempotencyKey, &e.CreatedAt)
	if err != nil {
		return e, err
	}
	if e.Type, err = stock.ParseChangeType(t); err != nil {
		return e, fmt.Errorf("ledger row %d: %w", e.ID, err)
	}
	return e, nil
}

func ledgerByKey(ctx context.Context, q querier, key string) (stock.LedgerEntry, error) {
	return scanLedger(q.QueryRow(ctx, `SELECT `+ledgerColumns+` FROM stock_ledger WHERE idempotency_key = $1`, key))
}

// GetSKU reads a SKU's summary; ErrUnknownSKU when there is none.
func (s *Store) GetSKU(ctx context.Context, sku string) (stock.SKUStock, error) {
	return getSKU(ctx, s.pool, sku, false)
}

// getSKU sums a SKU's slots; with forUpdate it locks them all, in slot order.
func getSKU(ctx context.Context, q querier, sku string, forUpdate bool) (stock.SKUStock, error) {
	st := stock.SKUStock{SKU: sku}
	sql := `SELECT s.on_hand, s.locked, s.sold, s.incoming, s.updated_at, k.slots FROM sku k JOIN sku_stock s ON s.sku = k.sku WHERE k.sku = $1 ORDER BY s.slot`
	if forUpdate {
		sql += ` FOR UPDATE OF s`
	}
	rows, err := q.Query(ctx, sql, sku)
	if err != nil {
		return st, fmt.Errorf("read sku %s: %w", sku, err)
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var q stock.Quantities
		var at time.Time
		if err := rows.Scan(&q.OnHand, &q.Locked, &q.Sold, &q.Incoming, &at, &st.Slots); err != nil {
			return st, fmt.Errorf("read sku %s: %w", sku, err)
		}
		st.Quantities, found = st.Quantities.Plus(q), true
		if at.After(st.UpdatedAt) {
			st.UpdatedAt = at
		}
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("read sku %s: %w", sku, err)
	}
	if !found {
		return st, fmt.Errorf("sku %s: %w", sku, stock.ErrUnknownSKU)
	}
	return st, nil
}

// Ledger returns the rows of a SKU's ledger q picks, oldest first. Every filter is a condition
// on the scan of the SKU's rows by the (sku, id) index: the ledger is written on every lock and
// gets no index for reads (migration 00003), and a filter walks at most the SKU's own rows.
func (s *Store) Ledger(ctx context.Context, sku string, q app.LedgerQuery) ([]stock.LedgerEntry, error) {
	if _, err := s.GetSKU(ctx, sku); err != nil {
		return nil, err
	}
	var p params
	where := "sku = " + p.add(sku) + " AND id > " + p.add(q.After)
	if len(q.Types) > 0 {
		types := make([]string, len(q.Types))
		for i, t := range q.Types {
			types[i] = string(t)
		}
		where += " AND change_type = ANY(" + p.add(types) + ")"
	}
	if q.OrderID != "" {
		where += " AND order_id = " + p.add(q.OrderID)
	}
	if q.Operator != "" {
		where += " AND operator = " + p.add(q.Operator)
	}
	if !q.Since.IsZero() {
		where += " AND created_at >= " + p.add(q.Since)
	}
	if !q.Until.IsZero() {
		where += " AND created_at < " + p.add(q.Until)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+ledgerColumns+` FROM stock_ledger WHERE `+where+` ORDER BY id LIMIT `+p.add(q.Limit), p...)
	if err != nil {
		return nil, fmt.Errorf("read ledger of %s: %w", sku, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stock.LedgerEntry, error) { return scanLedger(row) })
	if err != nil {
		return nil, fmt.Errorf("read ledger of %s: %w", sku, err)
	}
	return out, nil
}

// Locks returns the lock rows of an order (none when it holds no lock).
func (s *Store) Locks(ctx context.Context, orderID string) ([]*stock.Lock, error) {
	locks, err := locksOf(ctx, s.pool, []string{orderID}, false)
	out := make([]*stock.Lock, len(locks[orderID]))
	for i, l := range locks[orderID] {
		out[i] = l.Lock
	}
	return out, err
}

// RequestAdjustment stores a pending adjustment order. A stocktake records the point in the
// ledger its count was taken at (CountedAt), read in this transaction.
func (t *Tx) RequestAdjustment(ctx context.Context, a stock.Adjustment) (stock.Adjustment, error) {
	if _, err := getSKU(ctx, t.tx, a.SKU, false); err != nil {
		return a, err
	}
	a.CountedAt = nil
	var pointID, bookOnHand *int64
	if a.Kind == stock.ChangeStocktake {
		p, err := t.ledgerPoint(ctx, a.SKU)
		if err != nil {
			return a, err
		}
		if err := a.CountAt(p); err != nil {
			return a, err
		}
		pointID, bookOnHand = &p.LedgerID, &p.OnHand
	}
	err := t.tx.QueryRow(ctx, `INSERT INTO adjustment (sku, kind, delta, counted, reason, requested_by, counted_at_ledger_id, book_on_hand)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id, created_at`,
		a.SKU, string(a.Kind), a.Delta, a.Counted, a.Reason, a.RequestedBy, pointID, bookOnHand).Scan(&a.ID, &a.CreatedAt)
	if err != nil {
		return a, fmt.Errorf("request adjustment of %s: %w", a.SKU, err)
	}
	return a, nil
}

// ledgerPoint reads the SKU's last ledger row and its book on_hand. It first holds the SKU's
// slot rows FOR SHARE: every ledger row of a SKU is written under a lock on one of its slots,
// so movements in flight commit before the read and later ones wait for this transaction.
// The two figures therefore agree, and every row written after the point has a greater id.
func (t *Tx) ledgerPoint(ctx context.Context, sku string) (stock.LedgerPoint, error) {
	var p stock.LedgerPoint
	if err := t.flush(ctx); err != nil {
		return p, err
	}
	if _, err := t.tx.Exec(ctx, `SELECT 1 FROM sku_stock WHERE sku = $1 ORDER BY slot FOR SHARE`, sku); err != nil {
		return p, fmt.Errorf("hold slots of %s: %w", sku, err)
	}
	err := t.tx.QueryRow(ctx, `SELECT coalesce((SELECT max(id) FROM stock_ledger WHERE sku = $1), 0),
		coalesce((SELECT sum(on_hand) FROM sku_stock WHERE sku = $1), 0)`, sku).Scan(&p.LedgerID, &p.OnHand)
	if err != nil {
		return p, fmt.Errorf("read ledger point of %s: %w", sku, err)
	}
	return p, nil
}

// DecideAdjustment approves or rejects a pending adjustment. Approval applies its movement
// (ErrInsufficientStock when a manual adjustment would drop on_hand below what is locked and
// sold; ErrStocktakeConflict when a stocktake would, see stock.Adjustment.Movement) and
// changes nothing when it fails.
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
		cur, err := getSKU(ctx, t.tx, a.SKU, true)
		if err != nil {
			return a, err
		}
		m, ok, err := a.Movement(cur.Quantities)
		if err != nil {
			return a, err
		}
		if ok {
			e, err := t.moveOne(ctx, stock.SlotMove{Movement: m, Slot: -1, Key: fmt.Sprintf("adjustment/%d", id)}, by)
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
	a, err := scanAdjustment(q.QueryRow(ctx, `SELECT `+adjustmentColumns+` FROM adjustment WHERE id = $1`+suffix, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("adjustment %d: %w", id, stock.ErrAdjustmentNotFound)
	}
	if err != nil {
		return a, fmt.Errorf("read adjustment %d: %w", id, err)
	}
	return a, nil
}

const adjustmentColumns = `id, sku, kind, delta, counted, reason, requested_by, state, coalesce(decided_by, ''), ledger_id, created_at,
	counted_at_ledger_id, book_on_hand`

func scanAdjustment(row pgx.Row) (stock.Adjustment, error) {
	var a stock.Adjustment
	var kind, state string
	var pointID, bookOnHand *int64
	err := row.Scan(&a.ID, &a.SKU, &kind, &a.Delta, &a.Counted, &a.Reason, &a.RequestedBy, &state, &a.DecidedBy, &a.LedgerID, &a.CreatedAt,
		&pointID, &bookOnHand)
	if err != nil {
		return a, err
	}
	if a.Kind, err = stock.ParseChangeType(kind); err != nil {
		return a, err
	}
	if a.State, err = stock.ParseAdjustmentState(state); err != nil {
		return a, err
	}
	if pointID != nil && bookOnHand != nil {
		a.CountedAt = &stock.LedgerPoint{LedgerID: *pointID, OnHand: *bookOnHand}
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
