package stock

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
)

// A SKU may be split into slots: rows that lock independently, so concurrent batches on a hot
// SKU do not queue on one row. This file decides where movements go among the slots a
// transaction holds; the store only locks the rows and writes what was decided.

// SlotKey names one slot of a SKU.
type SlotKey struct {
	SKU  string
	Slot int
}

// SlotMove is a movement placed in a slot. With Slot < 0 the walk chooses: a movement that
// takes from available goes to a slot that has enough, arriving stock to the emptiest slot.
type SlotMove struct {
	Movement
	Slot int
	Key  string // the ledger row's idempotency key; OrderKey(Movement) when empty
}

// MoveGroup is movements that happen all or none (one order's lines), by one operator.
type MoveGroup struct {
	Moves    []SlotMove
	Operator string
}

// OrderKey is the idempotency key of a movement tied to an order: one per (order, SKU, type).
func OrderKey(m Movement) string { return m.OrderID + "/" + m.SKU + "/" + string(m.Type) }

// ArrivalSlot is where a movement not tied to a lock goes: incoming is kept in slot 0, so a
// purchase is expected and received there; anything else (-1) is placed by the walk.
func ArrivalSlot(m Movement) int {
	if m.Delta.Incoming != 0 {
		return 0
	}
	return -1
}

// SlotNeed is how many units a batch takes from available of one SKU.
type SlotNeed struct {
	SKU string
	Qty int64
}

// Demand lists the slots the groups' placed movements name, in (SKU, slot) order, and what
// the others take per SKU, in SKU order: what a store locks first, one slot with enough per
// SKU. ok is false when a movement without a slot does not take (stock arriving): only with
// every slot held can it be placed.
func Demand(groups []MoveGroup) (fixed []SlotKey, needs []SlotNeed, ok bool) {
	seen := map[SlotKey]bool{}
	need := map[string]int64{}
	for _, g := range groups {
		for _, m := range g.Moves {
			switch {
			case m.Slot >= 0:
				seen[SlotKey{m.SKU, m.Slot}] = true
			case m.Takes():
				need[m.SKU] += m.Qty.Int64()
			default:
				return nil, nil, false
			}
		}
	}
	fixed = slices.SortedFunc(maps.Keys(seen), func(a, b SlotKey) int {
		return cmp.Or(cmp.Compare(a.SKU, b.SKU), cmp.Compare(a.Slot, b.Slot))
	})
	for _, sku := range slices.Sorted(maps.Keys(need)) {
		needs = append(needs, SlotNeed{SKU: sku, Qty: need[sku]})
	}
	return fixed, needs, true
}

// Slots is the figures of the slot rows a transaction holds.
type Slots struct {
	figures map[SlotKey]Quantities
	active  map[string]int   // how many slots of each SKU seen take new locks
	held    map[string][]int // the slots held of each SKU, ascending
	all     bool             // every slot of every SKU involved is held: a refusal is final
}

// NewSlots returns an empty Slots; all says that every slot of each SKU added will be held,
// so that a movement refused on them is refused for good.
func NewSlots(all bool) *Slots {
	return &Slots{figures: map[SlotKey]Quantities{}, active: map[string]int{}, held: map[string][]int{}, all: all}
}

// Add records a held slot with its figures and the number of active slots of its SKU.
func (s *Slots) Add(k SlotKey, q Quantities, active int) {
	if i, dup := slices.BinarySearch(s.held[k.SKU], k.Slot); !dup {
		s.held[k.SKU] = slices.Insert(s.held[k.SKU], i, k.Slot)
	}
	s.figures[k], s.active[k.SKU] = q, active
}

// Walk walks the groups in order over the held figures, each all or none: a group that does
// not fit where the groups before it left the figures gets a MovementError naming its first
// SKU that did not fit (ErrInsufficientStock, or ErrUnknownSKU), and the walk goes on. It
// returns each group's ledger rows (or its error) and the sum each slot moves by. rot is
// where each SKU's search for a slot with enough starts.
func (s *Slots) Walk(groups []MoveGroup, rot int) (entries [][]LedgerEntry, errs []error, sums map[SlotKey]Quantities) {
	entries, errs = make([][]LedgerEntry, len(groups)), make([]error, len(groups))
	figures := maps.Clone(s.figures)
	sums = map[SlotKey]Quantities{}
	for gi, g := range groups {
		w := walker{Slots: s, accepted: figures, moved: map[SlotKey]Quantities{}, rot: rot, operator: g.Operator}
		if errs[gi] = w.walk(g.Moves); errs[gi] != nil {
			continue
		}
		for _, e := range w.entries {
			k := SlotKey{e.SKU, e.Slot}
			figures[k] = e.After
			sums[k] = sums[k].Plus(e.After.Minus(e.Before))
		}
		entries[gi] = w.entries
	}
	return entries, errs, sums
}

// Spread returns the movements that spread a SKU's available units evenly over its active
// slots (the first slots get the remainder; retired slots hand over all of theirs), as one
// pair of rebalance movements per transfer; none when the slots are already even.
// ErrUnknownSKU when no slot of the SKU is held.
func (s *Slots) Spread(sku string) ([]SlotMove, error) {
	slots := s.held[sku]
	if len(slots) == 0 {
		return nil, fmt.Errorf("sku %s: %w", sku, ErrUnknownSKU)
	}
	active := int64(s.active[sku])
	var total int64
	for _, sl := range slots {
		total += s.figures[SlotKey{sku, sl}].Available()
	}
	// surplus > 0: the slot gives that much; < 0: it takes.
	surplus := map[int]int64{}
	for _, sl := range slots {
		target := int64(0)
		if int64(sl) < active {
			target = total / active
			if int64(sl) < total%active {
				target++
			}
		}
		surplus[sl] = s.figures[SlotKey{sku, sl}].Available() - target
	}
	var moves []SlotMove
	for _, from := range slots {
		for _, to := range slots {
			x := min(surplus[from], -surplus[to])
			if x <= 0 {
				continue
			}
			q, err := NewQty(x)
			if err != nil {
				return nil, err
			}
			moves = append(moves, rebalanceMoves(sku, from, to, q, "rebalance")...)
			surplus[from], surplus[to] = surplus[from]-x, surplus[to]+x
		}
	}
	return moves, nil
}

// walker applies one group tentatively: moved overlays the figures the accepted groups left
// until this one is accepted too.
type walker struct {
	*Slots
	accepted map[SlotKey]Quantities
	moved    map[SlotKey]Quantities
	rot      int
	operator string
	entries  []LedgerEntry
}

func (w *walker) get(k SlotKey) (Quantities, bool) {
	if q, ok := w.moved[k]; ok {
		return q, true
	}
	q, ok := w.accepted[k]
	return q, ok
}

func (w *walker) walk(moves []SlotMove) error {
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

func refused(m SlotMove, err error) *MovementError {
	return &MovementError{SKU: m.SKU, Type: m.Type, Qty: m.Qty.Int64(), Err: err}
}

// apply moves slot by m and records its ledger row.
func (w *walker) apply(m SlotMove, slot int) error {
	k := SlotKey{m.SKU, slot}
	cur, ok := w.get(k)
	if !ok {
		return refused(m, ErrUnknownSKU)
	}
	if !m.Fits(cur) {
		return refused(m, ErrInsufficientStock)
	}
	next := cur.Plus(m.Delta)
	w.moved[k] = next
	key := m.Key
	if key == "" {
		key = OrderKey(m.Movement)
	}
	w.entries = append(w.entries, LedgerEntry{SKU: m.SKU, Slot: slot, Type: m.Type, Qty: m.Qty.Int64(), Before: cur, After: next,
		OrderID: m.OrderID, Operator: w.operator, Remark: m.Remark, IdempotencyKey: key})
	return nil
}

// place chooses m's slot: its own when fixed; for a take, the first active slot (from a
// rotating start) with enough, else — when every slot is held and together they have enough —
// the fullest active one after rebalancing the others into it; for arriving stock, the
// emptiest active one.
func (w *walker) place(m SlotMove) (int, error) {
	if m.Slot >= 0 {
		return m.Slot, nil
	}
	var active []int
	for _, s := range w.held[m.SKU] {
		if s < w.active[m.SKU] {
			active = append(active, s)
		}
	}
	if len(active) == 0 {
		if w.all {
			return 0, refused(m, ErrUnknownSKU)
		}
		return 0, refused(m, ErrInsufficientStock)
	}
	avail := func(s int) int64 { q, _ := w.get(SlotKey{m.SKU, s}); return q.Available() }
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
	for _, s := range w.held[m.SKU] {
		total += avail(s)
	}
	if !w.all || total < need {
		return 0, refused(m, ErrInsufficientStock)
	}
	target := slices.MaxFunc(active, func(a, b int) int { return int(avail(a) - avail(b)) })
	for _, s := range w.held[m.SKU] {
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
	q, err := NewQty(n)
	if err != nil {
		return err
	}
	for _, m := range rebalanceMoves(sku, from, to, q, remark) {
		if err := w.apply(m, m.Slot); err != nil {
			return err
		}
	}
	return nil
}

// rebalanceMoves move n available units of sku from one slot to another: a pair of ledger
// rows, out and in, under a fresh key.
func rebalanceMoves(sku string, from, to int, n Qty, remark string) []SlotMove {
	out, in := RebalanceMovements(sku, n)
	out.Remark, in.Remark = remark, remark
	key := "rebalance/" + rand.Text()
	return []SlotMove{{Movement: out, Slot: from, Key: key + "/out"}, {Movement: in, Slot: to, Key: key + "/in"}}
}
