package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// LockOrders locks many orders at once, each all or none, in the order given: an order that
// does not fit is rejected and the next one is tried. An order seen before (or twice in reqs)
// returns its first outcome with Duplicate set. A rejection is an outcome, not an error; the
// error is for the batch as a whole.
func (t *Tx) LockOrders(ctx context.Context, reqs []stock.LockRequest) ([]stock.LockResult, error) {
	groups := make([]stock.MoveGroup, len(reqs))
	for i, r := range reqs {
		groups[i] = stock.MoveGroup{Moves: make([]stock.SlotMove, len(r.Lines)), Operator: r.Operator}
		for j, l := range r.Lines {
			groups[i].Moves[j] = stock.SlotMove{Movement: stock.LockMovement(r.OrderID, l.SKU, l.Qty), Slot: -1}
		}
	}
	// One round trip claims the orders and holds a slot per SKU for all of them: a request
	// seen before only makes the slot asked for larger than needed.
	b := &pgx.Batch{}
	fresh := queueClaims(b, reqs)
	held, err := t.holdOneSlotEach(ctx, groups, b)
	if err != nil {
		return nil, fmt.Errorf("lock %d orders: %w", len(reqs), err)
	}
	var taken []int // the requests that claimed their order now
	for i := range reqs {
		if fresh[i] {
			groups[len(taken)], taken = groups[i], append(taken, i)
		}
	}
	entries, errs, err := t.moveHeld(ctx, groups[:len(taken)], held)
	if err != nil {
		return nil, fmt.Errorf("lock %d orders: %w", len(taken), err)
	}
	results := make([]stock.LockResult, len(reqs))
	var locks, rejects rowSet
	for k, i := range taken {
		r := reqs[i]
		res := stock.LockResult{OrderID: r.OrderID, Lines: r.Lines, Deadline: r.Deadline}
		var merr *stock.MovementError
		switch {
		case errs[k] == nil:
			res.Locked = true
			for _, e := range entries[k] {
				if e.Type == stock.ChangeLock {
					locks.add(r.OrderID, e.SKU, e.Qty, r.Deadline)
					locks.slots = append(locks.slots, e.Slot)
				}
			}
		case errors.As(errs[k], &merr):
			res.Reason, res.SKU = stock.RejectInsufficient, merr.SKU
			if errors.Is(merr, stock.ErrUnknownSKU) {
				res.Reason = stock.RejectUnknownSKU
			}
			rejects.add(r.OrderID, res.SKU, 0, time.Time{})
			rejects.values = append(rejects.values, res.Reason)
		default:
			return nil, fmt.Errorf("lock order %s: %w", r.OrderID, errs[k])
		}
		results[i] = res
	}
	if len(locks.orders) > 0 {
		t.staged.Queue(`INSERT INTO stock_lock (order_id, sku, slot, qty, state, deadline)
			SELECT o, s, sl, q, 'locked', d FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::timestamptz[]) AS u(o, s, sl, q, d)`,
			locks.orders, locks.skus, locks.slots, locks.qtys, locks.deadlines)
	}
	if len(rejects.orders) > 0 {
		t.staged.Queue(`UPDATE order_lock SET outcome = 'rejected', reject_reason = u.r, reject_sku = u.s
			FROM unnest($1::text[], $2::text[], $3::text[]) AS u(o, r, s) WHERE order_id = u.o`,
			rejects.orders, rejects.values, rejects.skus)
	}
	if slices.Contains(fresh, false) {
		if err := t.flush(ctx); err != nil { // the outcomes may be this batch's own
			return nil, err
		}
	}
	for i, r := range reqs {
		if !fresh[i] {
			if results[i], err = t.lockOutcome(ctx, r.OrderID); err != nil {
				return nil, err
			}
		}
	}
	return results, nil
}

// rowSet gathers the columns of a multi-row statement.
type rowSet struct {
	orders, skus, values []string // values: a reason or a state per row
	slots                []int
	qtys                 []int64
	deadlines            []time.Time
}

func (r *rowSet) add(order, sku string, qty int64, deadline time.Time) {
	r.orders, r.skus, r.qtys, r.deadlines = append(r.orders, order), append(r.skus, sku), append(r.qtys, qty), append(r.deadlines, deadline)
}

// queueClaims queues the claim of each new order as locked (a rejection overwrites that
// before commit); once b is sent, the slice it returns tells which requests claimed their
// order now. The claims are taken in order id order: a concurrent batch with the same order
// waits here for this one to commit.
func queueClaims(b *pgx.Batch, reqs []stock.LockRequest) []bool {
	ids := make([]string, len(reqs))
	deadlines := make([]time.Time, len(reqs))
	for i, r := range reqs {
		ids[i], deadlines[i] = r.OrderID, r.Deadline
	}
	fresh := make([]bool, len(reqs))
	b.Queue(`INSERT INTO order_lock (order_id, outcome, deadline)
		SELECT o, 'locked', d FROM unnest($1::text[], $2::timestamptz[]) AS u(o, d) ORDER BY o
		ON CONFLICT (order_id) DO NOTHING RETURNING order_id`, ids, deadlines).Query(func(rows pgx.Rows) error {
		claimed, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("claim %d orders: %w", len(reqs), err)
		}
		now := make(map[string]bool, len(claimed))
		for _, id := range claimed {
			now[id] = true
		}
		for i, r := range reqs {
			fresh[i] = now[r.OrderID]
			delete(now, r.OrderID) // the same order again later in reqs is a duplicate
		}
		return nil
	})
	return fresh
}

// lockOutcome reads the first outcome recorded for an order.
func (t *Tx) lockOutcome(ctx context.Context, orderID string) (stock.LockResult, error) {
	res := stock.LockResult{OrderID: orderID, Duplicate: true}
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
	locks, err := locksOf(ctx, t.tx, []string{orderID}, false)
	if err != nil {
		return res, err
	}
	for _, l := range locks[orderID] {
		res.Lines = append(res.Lines, stock.Line{SKU: l.SKU(), Qty: l.Qty()})
	}
	return res, nil
}

// heldLock is a lock row with the slot it took.
type heldLock struct {
	*stock.Lock
	slot int
}

// locksOf reads the lock rows of orders, by order, in (order, SKU) order.
func locksOf(ctx context.Context, q querier, orderIDs []string, forUpdate bool) (map[string][]heldLock, error) {
	sql := `SELECT order_id, sku, slot, qty, state, deadline FROM stock_lock WHERE order_id = ANY($1) ORDER BY order_id, sku`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, orderIDs)
	if err != nil {
		return nil, fmt.Errorf("read locks of %d orders: %w", len(orderIDs), err)
	}
	defer rows.Close()
	locks := map[string][]heldLock{}
	for rows.Next() {
		var order, sku, state string
		var slot int
		var qty int64
		var deadline time.Time
		if err := rows.Scan(&order, &sku, &slot, &qty, &state, &deadline); err != nil {
			return nil, fmt.Errorf("read locks of %d orders: %w", len(orderIDs), err)
		}
		l, err := stock.RestoreLock(order, sku, qty, state, deadline)
		if err != nil {
			return nil, err
		}
		locks[order] = append(locks[order], heldLock{Lock: l, slot: slot})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read locks of %d orders: %w", len(orderIDs), err)
	}
	return locks, nil
}

// UpdateLocks is the one way orders' locks change. It takes the lock rows of every order FOR
// UPDATE (in order and SKU order), lets each Step transition its order's locks, applies each
// order's movements all or none (moveGroups), and stores the new states. Each result's Err is
// ErrNoLock (wrapping ErrOrderUnknown when stock never saw the order), the Step's error, or a
// MovementError; the returned error is for the batch as a whole. An order must appear once.
func (t *Tx) UpdateLocks(ctx context.Context, ups []stock.LockUpdate) ([]stock.LockUpdateResult, error) {
	ids := make([]string, len(ups))
	for i, u := range ups {
		ids[i] = u.OrderID
	}
	locks, err := locksOf(ctx, t.tx, ids, true)
	if err != nil {
		return nil, err
	}
	results := make([]stock.LockUpdateResult, len(ups))
	var unseen []int // orders without lock rows: rejected, or not seen yet
	groups := make([]stock.MoveGroup, 0, len(ups))
	var stepped []int
	for i, u := range ups {
		ls := locks[u.OrderID]
		if len(ls) == 0 {
			unseen = append(unseen, i)
			continue
		}
		plain := make([]*stock.Lock, len(ls))
		for j, l := range ls {
			plain[j] = l.Lock
		}
		ms, err := u.Step(plain)
		if err != nil {
			results[i].Err = err
			continue
		}
		g := stock.MoveGroup{Moves: make([]stock.SlotMove, len(ms)), Operator: u.Operator}
		for j, m := range ms {
			g.Moves[j] = stock.SlotMove{Movement: m, Slot: -1}
			if !m.Takes() { // it stays in the slot its lock took; a late payment takes any
				g.Moves[j].Slot = slotOf(ls, m.SKU)
			}
		}
		groups, stepped = append(groups, g), append(stepped, i)
	}
	if err := t.explainNoLock(ctx, ups, unseen, results); err != nil {
		return nil, err
	}
	entries, errs, err := t.moveGroups(ctx, groups)
	if err != nil {
		return nil, fmt.Errorf("update locks of %d orders: %w", len(groups), err)
	}
	var states rowSet
	for k, i := range stepped {
		if results[i].Entries, results[i].Err = entries[k], errs[k]; errs[k] != nil {
			continue
		}
		moved := map[string]int{}
		for _, e := range entries[k] {
			if e.Type != stock.ChangeRebalance {
				moved[e.SKU] = e.Slot
			}
		}
		for _, l := range locks[ups[i].OrderID] {
			states.add(l.OrderID(), l.SKU(), 0, time.Time{})
			states.values = append(states.values, string(l.State()))
			slot, ok := moved[l.SKU()]
			if !ok {
				slot = l.slot
			}
			states.slots = append(states.slots, slot)
		}
	}
	if len(states.orders) > 0 {
		t.staged.Queue(`UPDATE stock_lock SET state = u.state, slot = u.slot, resolved_at = coalesce(resolved_at, statement_timestamp())
			FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) AS u(o, sku, state, slot)
			WHERE stock_lock.order_id = u.o AND stock_lock.sku = u.sku AND stock_lock.state <> u.state`,
			states.orders, states.skus, states.values, states.slots)
	}
	return results, nil
}

func slotOf(locks []heldLock, sku string) int {
	for _, l := range locks {
		if l.SKU() == sku {
			return l.slot
		}
	}
	return 0
}

// explainNoLock sets ErrNoLock on the results of orders without lock rows, wrapping
// ErrOrderUnknown for those stock has never seen (their order.created may still come) and
// answering ErrOrderUnknown alone for those whose locks committed after locksOf read them.
func (t *Tx) explainNoLock(ctx context.Context, ups []stock.LockUpdate, unseen []int, results []stock.LockUpdateResult) error {
	if len(unseen) == 0 {
		return nil
	}
	ids := make([]string, len(unseen))
	for k, i := range unseen {
		ids[k] = ups[i].OrderID
	}
	// One statement, so one snapshot: an order's claim and its locks commit together, and a
	// lock committed after locksOf read (this transaction is READ COMMITTED) must not pass for
	// a rejected order.
	rows, err := t.tx.Query(ctx, `SELECT o.order_id, EXISTS (SELECT 1 FROM stock_lock l WHERE l.order_id = o.order_id)
		FROM order_lock o WHERE o.order_id = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("read %d orders: %w", len(ids), err)
	}
	known := map[string]bool{} // order id → it holds locks now
	var id string
	var locked bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &locked}, func() error { known[id] = locked; return nil }); err != nil {
		return fmt.Errorf("read %d orders: %w", len(ids), err)
	}
	for _, i := range unseen {
		id := ups[i].OrderID
		locked, seen := known[id]
		switch {
		case !seen:
			results[i].Err = fmt.Errorf("order %s: %w (%w)", id, stock.ErrNoLock, stock.ErrOrderUnknown)
		case locked: // its locks committed after locksOf read: retry
			results[i].Err = fmt.Errorf("order %s: locked meanwhile: %w", id, stock.ErrOrderUnknown)
		default: // rejected: it never held stock
			results[i].Err = fmt.Errorf("order %s: %w", id, stock.ErrNoLock)
		}
	}
	return nil
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

// RecordPayments stores, per order, the payment that sold its locks (orders[i] by payments[i]).
func (t *Tx) RecordPayments(orders, payments []string) {
	if len(orders) > 0 {
		t.staged.Queue(`UPDATE order_lock SET payment_id = u.p FROM unnest($1::text[], $2::text[]) AS u(o, p) WHERE order_id = u.o`, orders, payments)
	}
}
