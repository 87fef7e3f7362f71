package postgres

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// moveGroups applies many groups of movements in one pass — the combining of DESIGN §7. It
// locks the slot rows the groups need, then lets stock.Slots.Walk place and check the groups
// in order, each all or none, over the figures it read. One guarded UPDATE then moves each
// slot by the sum of what was accepted, and one INSERT appends the ledger rows — one per
// movement, each with its slot's figures before and after — both staged for the commit, while
// the row locks are held.
//
// Slots are locked without deadlocks: first, in one round trip, the slots fixed by locks in
// (SKU, slot) order, then for each SKU to take from one slot that has enough for the whole
// batch, skipping slots other transactions hold (SKIP LOCKED never waits). When that leaves
// any group out, the slots are let go (ROLLBACK TO SAVEPOINT) and every slot of the SKUs
// involved is locked in (SKU, slot) order: only then is a refusal final, and a line that no
// single slot can hold is rebalanced into one before it is taken.
//
// It returns, per group, the ledger rows written (their ids and times are filled in when the
// staged writes are sent) or the error that left it out; err is for the batch as a whole.
func (t *Tx) moveGroups(ctx context.Context, groups []stock.MoveGroup) (entries [][]stock.LedgerEntry, errs []error, err error) {
	if len(groups) == 0 {
		return nil, nil, nil
	}
	fast, err := t.holdOneSlotEach(ctx, groups, &pgx.Batch{})
	if err != nil {
		return nil, nil, err
	}
	return t.moveHeld(ctx, groups, fast)
}

// moveHeld is moveGroups once holdOneSlotEach has run: fast is what it holds (nil: nothing,
// the slow path), for these groups or for more than them.
func (t *Tx) moveHeld(ctx context.Context, groups []stock.MoveGroup, fast *stock.Slots) (entries [][]stock.LedgerEntry, errs []error, err error) {
	if len(groups) == 0 {
		return nil, nil, nil
	}
	rot := mathrand.IntN(stock.MaxSlots) // where each SKU's search for a slot starts
	var sums map[stock.SlotKey]stock.Quantities
	if fast != nil {
		entries, errs, sums = fast.Walk(groups, rot)
	}
	if fast == nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		all, err := t.holdAllSlots(ctx, groups, fast != nil)
		if err != nil {
			return nil, nil, err
		}
		entries, errs, sums = all.Walk(groups, rot)
	}
	var rows []*stock.LedgerEntry
	for _, es := range entries {
		for i := range es {
			rows = append(rows, &es[i])
		}
	}
	if len(rows) > 0 {
		t.stageSummaries(sums)
		t.stageLedger(rows)
	}
	return entries, errs, nil
}

const slotColumns = `s.sku, s.slot, s.on_hand, s.locked, s.sold, s.incoming, k.slots`

// holdOneSlotEach is the first, non-blocking try: the fixed slots, and per SKU to take from
// one free slot that has enough for the whole batch (stock.Demand). It returns nil (and locks
// nothing) when a group has a movement that needs the slow path (stock arriving, say).
// Statements already queued in b go ahead of the slots, in the same round trip.
func (t *Tx) holdOneSlotEach(ctx context.Context, groups []stock.MoveGroup, b *pgx.Batch) (*stock.Slots, error) {
	fixed, needs, ok := stock.Demand(groups)
	if !ok {
		if b.Len() > 0 {
			if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
				return nil, fmt.Errorf("lock slots: %w", err)
			}
		}
		return nil, nil
	}
	b.Queue(`SAVEPOINT slots`)
	h := stock.NewSlots(false)
	if len(fixed) > 0 {
		skus, slots := make([]string, len(fixed)), make([]int, len(fixed))
		for i, k := range fixed {
			skus[i], slots[i] = k.SKU, k.Slot
		}
		b.Queue(`SELECT `+slotColumns+` FROM sku_stock s JOIN sku k ON k.sku = s.sku
			WHERE (s.sku, s.slot) IN (SELECT * FROM unnest($1::text[], $2::int[])) ORDER BY s.sku, s.slot FOR UPDATE OF s`,
			skus, slots).Query(scanSlots(h))
	}
	if len(needs) > 0 {
		skus, qtys := make([]string, len(needs)), make([]int64, len(needs))
		for i, n := range needs {
			skus[i], qtys[i] = n.SKU, n.Qty
		}
		b.Queue(`SELECT `+slotColumns+` FROM unnest($1::text[], $2::bigint[]) AS u(sku, need)
			CROSS JOIN LATERAL (SELECT s.* FROM sku_stock s JOIN sku k ON k.sku = s.sku
			                     WHERE s.sku = u.sku AND s.slot < k.slots AND s.available >= u.need
			                     ORDER BY (s.slot + $3) % k.slots LIMIT 1 FOR UPDATE OF s SKIP LOCKED) s
			JOIN sku k ON k.sku = s.sku`,
			skus, qtys, mathrand.IntN(stock.MaxSlots)).Query(scanSlots(h))
	}
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("lock slots: %w", err)
	}
	return h, nil
}

// holdAllSlots locks every slot of every SKU the groups move, in (SKU, slot) order, after
// letting go of what holdOneSlotEach took (retry).
func (t *Tx) holdAllSlots(ctx context.Context, groups []stock.MoveGroup, retry bool) (*stock.Slots, error) {
	var skus []string
	for _, g := range groups {
		for _, m := range g.Moves {
			skus = append(skus, m.SKU)
		}
	}
	return t.holdSlotsOf(ctx, skus, retry)
}

// holdSlotsOf locks every slot of skus, in (SKU, slot) order.
func (t *Tx) holdSlotsOf(ctx context.Context, skus []string, retry bool) (*stock.Slots, error) {
	skus = slices.Compact(slices.Sorted(slices.Values(skus)))
	b := &pgx.Batch{}
	if retry {
		b.Queue(`ROLLBACK TO SAVEPOINT slots`)
	}
	h := stock.NewSlots(true)
	b.Queue(`SELECT `+slotColumns+` FROM sku_stock s JOIN sku k ON k.sku = s.sku
		WHERE s.sku = ANY($1) ORDER BY s.sku, s.slot FOR UPDATE OF s`, skus).Query(scanSlots(h))
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("lock slots of %d skus: %w", len(skus), err)
	}
	return h, nil
}

// scanSlots reads slotColumns rows into h.
func scanSlots(h *stock.Slots) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		for rows.Next() {
			var k stock.SlotKey
			var q stock.Quantities
			var active int
			if err := rows.Scan(&k.SKU, &k.Slot, &q.OnHand, &q.Locked, &q.Sold, &q.Incoming, &active); err != nil {
				return err
			}
			h.Add(k, q, active)
		}
		return rows.Err()
	}
}

// stageSummaries moves each slot by its sum, on condition that every figure stays valid — the
// same guard the walk checked, checked again by the database: a slot it refuses fails the
// statement (stock_summary_guard), and with it the transaction (refused tells the caller).
func (t *Tx) stageSummaries(sums map[stock.SlotKey]stock.Quantities) {
	n := len(sums)
	var skus []string
	var slots []int
	var onHand, locked, sold, incoming []int64
	for k, d := range sums {
		skus, slots = append(skus, k.SKU), append(slots, k.Slot)
		onHand, locked, sold, incoming = append(onHand, d.OnHand), append(locked, d.Locked), append(sold, d.Sold), append(incoming, d.Incoming)
	}
	t.staged.Queue(`
		WITH moved AS (
		    UPDATE sku_stock s
		       SET on_hand = s.on_hand + u.on_hand, locked = s.locked + u.locked, sold = s.sold + u.sold,
		           incoming = s.incoming + u.incoming, available = s.available + u.on_hand - u.locked - u.sold, updated_at = now()
		      FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS u(sku, slot, on_hand, locked, sold, incoming)
		     WHERE s.sku = u.sku AND s.slot = u.slot
		       AND s.available + u.on_hand - u.locked - u.sold >= 0 AND s.on_hand + u.on_hand >= 0
		       AND s.locked + u.locked >= 0 AND s.sold + u.sold >= 0 AND s.incoming + u.incoming >= 0
		 RETURNING 1)
		SELECT stock_summary_guard((SELECT count(*) FROM moved), $7, $8)`,
		skus, slots, onHand, locked, sold, incoming, n, slices.Compact(slices.Sorted(slices.Values(skus))))
}

// refused returns err as an *app.OversellError when the summaries' guard (stageSummaries)
// failed it, and err unchanged otherwise.
func refused(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.ConstraintName == "summary_guard" {
		return &app.OversellError{SKUs: strings.Fields(pgErr.Detail), Detail: pgErr.Message}
	}
	return err
}

// stageLedger appends rows in their order (ids ascend with it) and fills in their ids and
// times when it is sent.
func (t *Tx) stageLedger(rows []*stock.LedgerEntry) {
	n := len(rows)
	skus, types, orders, operators, remarks, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	slots := make([]int, n)
	var qty []int64
	var figures [8][]int64 // on_hand, locked, sold, incoming before, then after
	for i, e := range rows {
		skus[i], types[i], orders[i], operators[i], remarks[i], keys[i] = e.SKU, string(e.Type), e.OrderID, e.Operator, e.Remark, e.IdempotencyKey
		slots[i] = e.Slot
		qty = append(qty, e.Qty)
		for k, v := range []int64{e.Before.OnHand, e.Before.Locked, e.Before.Sold, e.Before.Incoming, e.After.OnHand, e.After.Locked, e.After.Sold, e.After.Incoming} {
			figures[k] = append(figures[k], v)
		}
	}
	t.staged.Queue(`
		INSERT INTO stock_ledger (sku, slot, change_type, qty, on_hand_before, locked_before, sold_before, incoming_before,
		       on_hand_after, locked_after, sold_after, incoming_after, order_id, operator, remark, idempotency_key)
		SELECT sku, slot, ct, qty, ob, lb, sb, ib, oa, la, sa, ia, nullif(oid, ''), op, rm, k
		  FROM unnest($1::text[], $2::int[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[],
		              $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::text[], $16::text[])
		       WITH ORDINALITY AS u(sku, slot, ct, qty, ob, lb, sb, ib, oa, la, sa, ia, oid, op, rm, k, n)
		 ORDER BY n
		RETURNING idempotency_key, id, created_at`,
		skus, slots, types, qty, figures[0], figures[1], figures[2], figures[3],
		figures[4], figures[5], figures[6], figures[7], orders, operators, remarks, keys).Query(func(res pgx.Rows) error {
		byKey := make(map[string]*stock.LedgerEntry, n)
		for _, e := range rows {
			byKey[e.IdempotencyKey] = e
		}
		for res.Next() {
			var k string
			var id int64
			var at time.Time
			if err := res.Scan(&k, &id, &at); err != nil {
				return fmt.Errorf("append %d ledger rows: %w", n, err)
			}
			byKey[k].ID, byKey[k].CreatedAt = id, at
		}
		return res.Err()
	})
}

// moveOne makes one movement not tied to a lock (a purchase, an adjustment, an opening
// balance) under key, locking every slot of its SKU, and returns its ledger row (the last one
// written: a take may first rebalance slots). The row's id is known on return.
func (t *Tx) moveOne(ctx context.Context, m stock.SlotMove, operator string) (stock.LedgerEntry, error) {
	entries, errs, err := t.moveGroups(ctx, []stock.MoveGroup{{Moves: []stock.SlotMove{m}, Operator: operator}})
	if err != nil {
		return stock.LedgerEntry{}, err
	}
	if errs[0] != nil {
		return stock.LedgerEntry{}, errs[0]
	}
	if err := t.flush(ctx); err != nil {
		return stock.LedgerEntry{}, err
	}
	return entries[0][len(entries[0])-1], nil
}
