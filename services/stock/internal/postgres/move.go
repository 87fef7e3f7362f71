package postgres

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	mathrand "math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// slotKey names one row of sku_stock.
type slotKey struct {
	sku  string
	slot int
}

// move is a movement placed in a slot. With slot < 0 the walk chooses: a movement that takes
// from available goes to a slot that has enough, arriving stock to the emptiest slot.
type move struct {
	stock.Movement
	slot int
	key  string // the ledger row's idempotency key; orderKey(Movement) when empty
}

// group is moves that happen all or none (one order's lines), by one operator.
type group struct {
	moves    []move
	operator string
}

// moveGroups applies many groups of movements in one pass — the combining of DESIGN §7. It
// locks the slot rows the groups need, then walks the groups in order, each all or none: a
// group that does not fit where the groups before it left the figures gets a MovementError
// naming its first SKU that did not fit (ErrInsufficientStock, or ErrUnknownSKU), and the walk
// goes on, so no group is refused while stock for it remains. One conditional UPDATE then
// moves each slot by the sum of what was accepted, and one INSERT appends the ledger rows —
// one per movement, each with its slot's figures before and after — both staged for the
// commit, while the row locks are held.
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
func (t *Tx) moveGroups(ctx context.Context, groups []group) (entries [][]stock.LedgerEntry, errs []error, err error) {
	if len(groups) == 0 {
		return nil, nil, nil
	}
	rot := mathrand.IntN(stock.MaxSlots) // where each SKU's search for a slot starts
	fast, err := t.holdOneSlotEach(ctx, groups)
	if err != nil {
		return nil, nil, err
	}
	var sums map[slotKey]stock.Quantities
	if fast != nil {
		entries, errs, sums = fast.walkAll(groups, rot)
	}
	if fast == nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		all, err := t.holdAllSlots(ctx, groups, fast != nil)
		if err != nil {
			return nil, nil, err
		}
		entries, errs, sums = all.walkAll(groups, rot)
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

// held is the slot rows a transaction has locked.
type held struct {
	figures map[slotKey]stock.Quantities
	slots   map[string]int   // the active slots of each SKU seen
	rows    map[string][]int // the slots held of each SKU, ascending
	all     bool             // every slot of every SKU involved is held: a refusal is final
}

const slotColumns = `s.sku, s.slot, s.on_hand, s.locked, s.sold, s.incoming, k.slots`

// holdOneSlotEach is the first, non-blocking try: the fixed slots, and per SKU to take from
// one free slot that has enough for the whole batch. It returns nil (and locks nothing) when
// a group has a movement that needs the slow path (stock arriving, say).
func (t *Tx) holdOneSlotEach(ctx context.Context, groups []group) (*held, error) {
	fixedSKUs, fixedSlots, takeSKUs, needs, ok := demand(groups)
	if !ok {
		return nil, nil
	}
	b := &pgx.Batch{}
	b.Queue(`SAVEPOINT slots`)
	h := &held{figures: map[slotKey]stock.Quantities{}, slots: map[string]int{}, rows: map[string][]int{}}
	if len(fixedSKUs) > 0 {
		b.Queue(`SELECT `+slotColumns+` FROM sku_stock s JOIN sku k ON k.sku = s.sku
			WHERE (s.sku, s.slot) IN (SELECT * FROM unnest($1::text[], $2::int[])) ORDER BY s.sku, s.slot FOR UPDATE OF s`,
			fixedSKUs, fixedSlots).Query(h.scan)
	}
	if len(takeSKUs) > 0 {
		b.Queue(`SELECT `+slotColumns+` FROM unnest($1::text[], $2::bigint[]) AS u(sku, need)
			CROSS JOIN LATERAL (SELECT s.* FROM sku_stock s JOIN sku k ON k.sku = s.sku
			                     WHERE s.sku = u.sku AND s.slot < k.slots AND s.available >= u.need
			                     ORDER BY (s.slot + $3) % k.slots LIMIT 1 FOR UPDATE OF s SKIP LOCKED) s
			JOIN sku k ON k.sku = s.sku`,
			takeSKUs, needs, mathrand.IntN(stock.MaxSlots)).Query(h.scan)
	}
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("lock slots: %w", err)
	}
	return h, nil
}

// holdAllSlots locks every slot of every SKU the groups move, in (SKU, slot) order, after
// letting go of what holdOneSlotEach took (retry).
func (t *Tx) holdAllSlots(ctx context.Context, groups []group, retry bool) (*held, error) {
	var skus []string
	for _, g := range groups {
		for _, m := range g.moves {
			skus = append(skus, m.SKU)
		}
	}
	return t.holdSlotsOf(ctx, skus, retry)
}

// holdSlotsOf locks every slot of skus, in (SKU, slot) order.
func (t *Tx) holdSlotsOf(ctx context.Context, skus []string, retry bool) (*held, error) {
	skus = slices.Compact(slices.Sorted(slices.Values(skus)))
	b := &pgx.Batch{}
	if retry {
		b.Queue(`ROLLBACK TO SAVEPOINT slots`)
	}
	h := &held{figures: map[slotKey]stock.Quantities{}, slots: map[string]int{}, rows: map[string][]int{}, all: true}
	b.Queue(`SELECT `+slotColumns+` FROM sku_stock s JOIN sku k ON k.sku = s.sku
		WHERE s.sku = ANY($1) ORDER BY s.sku, s.slot FOR UPDATE OF s`, skus).Query(h.scan)
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("lock slots of %d skus: %w", len(skus), err)
	}
	return h, nil
}

// demand sums what the groups take per SKU and lists the fixed slots (sorted). ok is false
// when a movement without a slot does not take (stock arriving): only the slow path places it.
func demand(groups []group) (fixedSKUs []string, fixedSlots []int, takeSKUs []string, needs []int64, ok bool) {
	fixed := map[slotKey]bool{}
	need := map[string]int64{}
	for _, g := range groups {
		for _, m := range g.moves {
			switch {
			case m.slot >= 0:
				fixed[slotKey{m.SKU, m.slot}] = true
			case m.Takes():
				need[m.SKU] += m.Qty.Int64()
			default:
				return nil, nil, nil, nil, false
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(fixed), func(a, b slotKey) int {
		return cmp.Or(cmp.Compare(a.sku, b.sku), cmp.Compare(a.slot, b.slot))
	})
	for _, k := range keys {
		fixedSKUs, fixedSlots = append(fixedSKUs, k.sku), append(fixedSlots, k.slot)
	}
	for _, sku := range slices.Sorted(maps.Keys(need)) {
		takeSKUs, needs = append(takeSKUs, sku), append(needs, need[sku])
	}
	return fixedSKUs, fixedSlots, takeSKUs, needs, true
}

func (h *held) scan(rows pgx.Rows) error {
	for rows.Next() {
		var k slotKey
		var q stock.Quantities
		var slots int
		if err := rows.Scan(&k.sku, &k.slot, &q.OnHand, &q.Locked, &q.Sold, &q.Incoming, &slots); err != nil {
			return err
		}
		if i, dup := slices.BinarySearch(h.rows[k.sku], k.slot); !dup {
			h.rows[k.sku] = slices.Insert(h.rows[k.sku], i, k.slot)
		}
		h.figures[k], h.slots[k.sku] = q, slots
	}
	return rows.Err()
}

// walkAll walks the groups in order over the held figures and returns each group's ledger rows
// or error, and the sum each slot moves by.
func (h *held) walkAll(groups []group, rot int) ([][]stock.LedgerEntry, []error, map[slotKey]stock.Quantities) {
	entries, errs := make([][]stock.LedgerEntry, len(groups)), make([]error, len(groups))
	figures := maps.Clone(h.figures)
	sums := map[slotKey]stock.Quantities{}
	for gi, g := range groups {
		w := walker{held: h, accepted: figures, moved: map[slotKey]stock.Quantities{}, rot: rot, operator: g.operator}
		if errs[gi] = w.walk(g.moves); errs[gi] != nil {
			continue
		}
		for _, e := range w.entries {
			k := slotKey{e.SKU, e.Slot}
			figures[k] = e.After
			sums[k] = sums[k].Plus(e.After.Minus(e.Before))
		}
		entries[gi] = w.entries
	}
	return entries, errs, sums
}

// walker applies one group tentatively: moved overlays the figures the accepted groups left
// until this one is accepted too.
type walker struct {
	*held
	accepted map[slotKey]stock.Quantities
	moved    map[slotKey]stock.Quantities
	rot      int
	operator string
	entries  []stock.LedgerEntry
}

func (w *walker) get(k slotKey) (stock.Quantities, bool) {
	if q, ok := w.moved[k]; ok {
		return q, true
	}
	q, ok := w.accepted[k]
	return q, ok
}

func (w *walker) walk(moves []move) error {
	for _, m := range moves {
		slot, err := w.place(m)
		if err != nil {
			return err
		}
		if err := w.apply(m, slot); err != nil {
			return err
		}
	}
	return nil
}

// apply moves slot by m and records its ledger row.
func (w *walker) apply(m move, slot int) error {
	k := slotKey{m.SKU, slot}
	cur, ok := w.get(k)
	if !ok {
		return &stock.MovementError{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), Err: stock.ErrUnknownSKU}
	}
	if !m.Fits(cur) {
		return &stock.MovementError{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), Err: stock.ErrInsufficientStock}
	}
	next := cur.Plus(m.Delta)
	w.moved[k] = next
	key := m.key
	if key == "" {
		key = orderKey(m.Movement)
	}
	w.entries = append(w.entries, stock.LedgerEntry{SKU: m.SKU, Slot: slot, Type: m.Type, Qty: m.Qty.Int64(), Before: cur, After: next,
		OrderID: m.OrderID, Operator: w.operator, Remark: m.Remark, IdempotencyKey: key})
	return nil
}

// place chooses m's slot: its own when fixed; for a take, the first active slot (from a
// rotating start) with enough, else — when every slot is held and together they have enough —
// the fullest active one after rebalancing the others into it; for arriving stock, the
// emptiest active one.
func (w *walker) place(m move) (int, error) {
	if m.slot >= 0 {
		return m.slot, nil
	}
	var active []int
	for _, s := range w.rows[m.SKU] {
		if s < w.slots[m.SKU] {
			active = append(active, s)
		}
	}
	if len(active) == 0 {
		err := stock.ErrInsufficientStock
		if w.all {
			err = stock.ErrUnknownSKU
		}
		return 0, &stock.MovementError{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), Err: err}
	}
	avail := func(s int) int64 { q, _ := w.get(slotKey{m.SKU, s}); return q.Available() }
	if !m.Takes() {
		return slices.MinFunc(active, func(a, b int) int { return int(avail(a) - avail(b)) }), nil
	}
	need := m.Qty.Int64()
	for i := range active {
		if s := active[(w.rot+i)%len(active)]; avail(s) >= need {
			return s, nil
		}
	}
	// No active slot has enough: with every slot held, gather into the fullest active one
	// from the others, retired slots included.
	total := int64(0)
	for _, s := range w.rows[m.SKU] {
		total += avail(s)
	}
	if !w.all || total < need {
		return 0, &stock.MovementError{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), Err: stock.ErrInsufficientStock}
	}
	target := slices.MaxFunc(active, func(a, b int) int { return int(avail(a) - avail(b)) })
	for _, s := range w.rows[m.SKU] {
		if s == target || avail(target) >= need {
			continue
		}
		if err := w.rebalance(m.SKU, s, target, min(avail(s), need-avail(target)), "to fit a line of "+m.OrderID); err != nil {
			return 0, err
		}
	}
	return target, nil
}

// rebalance moves n available units of sku from one slot to another.
func (w *walker) rebalance(sku string, from, to int, n int64, remark string) error {
	if n <= 0 {
		return nil
	}
	q, err := stock.NewQty(n)
	if err != nil {
		return err
	}
	for _, m := range rebalanceMoves(sku, from, to, q, remark) {
		if err := w.apply(m, m.slot); err != nil {
			return err
		}
	}
	return nil
}

// rebalanceMoves move n available units of sku from one slot to another: a pair of ledger
// rows, out and in.
func rebalanceMoves(sku string, from, to int, n stock.Qty, remark string) []move {
	out, in := stock.RebalanceMovements(sku, n)
	out.Remark, in.Remark = remark, remark
	key := "rebalance/" + rand.Text()
	return []move{{Movement: out, slot: from, key: key + "/out"}, {Movement: in, slot: to, key: key + "/in"}}
}

// stageSummaries moves each slot by its sum, on condition that every figure stays valid — the
// same guard the walk checked, checked again by the database's constraints.
func (t *Tx) stageSummaries(sums map[slotKey]stock.Quantities) {
	n := len(sums)
	var skus []string
	var slots []int
	var onHand, locked, sold, incoming []int64
	for k, d := range sums {
		skus, slots = append(skus, k.sku), append(slots, k.slot)
		onHand, locked, sold, incoming = append(onHand, d.OnHand), append(locked, d.Locked), append(sold, d.Sold), append(incoming, d.Incoming)
	}
	t.staged.Queue(`
		UPDATE sku_stock s
		   SET on_hand = s.on_hand + u.on_hand, locked = s.locked + u.locked, sold = s.sold + u.sold,
		       incoming = s.incoming + u.incoming, available = s.available + u.on_hand - u.locked - u.sold, updated_at = now()
		  FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS u(sku, slot, on_hand, locked, sold, incoming)
		 WHERE s.sku = u.sku AND s.slot = u.slot
		   AND s.available + u.on_hand - u.locked - u.sold >= 0 AND s.on_hand + u.on_hand >= 0
		   AND s.locked + u.locked >= 0 AND s.sold + u.sold >= 0 AND s.incoming + u.incoming >= 0`,
		skus, slots, onHand, locked, sold, incoming).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != int64(n) {
			return fmt.Errorf("move %d slots: %d rows matched the guard; summaries changed under a row lock", n, tag.RowsAffected())
		}
		return nil
	})
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
func (t *Tx) moveOne(ctx context.Context, m move, operator string) (stock.LedgerEntry, error) {
	entries, errs, err := t.moveGroups(ctx, []group{{moves: []move{m}, operator: operator}})
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
