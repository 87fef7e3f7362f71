package stock_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// held returns the slots of SKU "A" with the given available units (as on_hand), of which the
// first active take new locks; all says every slot of the SKU is held.
func held(all bool, active int, avail ...int64) *stock.Slots {
	s := stock.NewSlots(all)
	for i, n := range avail {
		s.Add(stock.SlotKey{SKU: "A", Slot: i}, stock.Quantities{OnHand: n}, active)
	}
	return s
}

func take(order string, n int64) stock.SlotMove {
	return stock.SlotMove{Movement: stock.LockMovement(order, "A", stock.MustQty(n)), Slot: -1}
}

func group(moves ...stock.SlotMove) stock.MoveGroup {
	return stock.MoveGroup{Moves: moves, Operator: "t"}
}

// placed is a ledger row of the walk: its type, slot and quantity.
type placed struct {
	Type stock.ChangeType
	Slot int
	Qty  int64
}

func TestWalkPlacesEachMovement(t *testing.T) {
	arrive, _, err := stock.OnHandMovement("A", stock.ChangeManualAdjust, 4)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		slots *stock.Slots
		rot   int
		move  stock.SlotMove
		want  []placed
		err   error
	}{
		{name: "a take goes to the first active slot with enough, from the rotating start",
			slots: held(false, 3, 5, 5, 5), rot: 2, move: take("o", 3), want: []placed{{stock.ChangeLock, 2, 3}}},
		{name: "a take passes over slots without enough",
			slots: held(false, 3, 1, 2, 5), move: take("o", 3), want: []placed{{stock.ChangeLock, 2, 3}}},
		{name: "a movement with a slot stays in it",
			slots: held(false, 3, 5, 5, 5), move: stock.SlotMove{Movement: take("o", 1).Movement, Slot: 1}, want: []placed{{stock.ChangeLock, 1, 1}}},
		{name: "arriving stock goes to the emptiest active slot",
			slots: held(true, 3, 5, 1, 3), move: stock.SlotMove{Movement: arrive, Slot: -1}, want: []placed{{stock.ChangeManualAdjust, 1, 4}}},
		{name: "no slot has enough and every slot is held: the others are gathered into the fullest",
			slots: held(true, 2, 3, 4), move: take("o", 6),
			want: []placed{{stock.ChangeRebalance, 0, 2}, {stock.ChangeRebalance, 1, 2}, {stock.ChangeLock, 1, 6}}},
		{name: "retired slots hand over their units to fit a line",
			slots: held(true, 1, 0, 5), move: take("o", 5),
			want: []placed{{stock.ChangeRebalance, 1, 5}, {stock.ChangeRebalance, 0, 5}, {stock.ChangeLock, 0, 5}}},
		{name: "no slot has enough and not every slot is held: refused until all are",
			slots: held(false, 2, 3, 4), move: take("o", 6), err: stock.ErrInsufficientStock},
		{name: "together the slots have too little: refused",
			slots: held(true, 2, 3, 2), move: take("o", 6), err: stock.ErrInsufficientStock},
		{name: "a SKU with no slot held is unknown once every slot is held",
			slots: stock.NewSlots(true), move: take("o", 1), err: stock.ErrUnknownSKU},
		{name: "a SKU with no slot held on the first try is only short",
			slots: stock.NewSlots(false), move: take("o", 1), err: stock.ErrInsufficientStock},
		{name: "a movement that does not fit its own slot is refused",
			slots: held(false, 2, 5, 0), move: stock.SlotMove{Movement: take("o", 1).Movement, Slot: 1}, err: stock.ErrInsufficientStock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, errs, _ := tc.slots.Walk([]stock.MoveGroup{group(tc.move)}, tc.rot)
			if tc.err != nil {
				var merr *stock.MovementError
				require.ErrorAs(t, errs[0], &merr)
				assert.ErrorIs(t, errs[0], tc.err)
				assert.Equal(t, "A", merr.SKU)
				assert.Empty(t, entries[0])
				return
			}
			require.NoError(t, errs[0])
			var got []placed
			for _, e := range entries[0] {
				got = append(got, placed{e.Type, e.Slot, e.Qty})
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestWalkTakesGroupsAllOrNoneInOrder(t *testing.T) {
	s := held(true, 1, 5)
	s.Add(stock.SlotKey{SKU: "B", Slot: 0}, stock.Quantities{OnHand: 1}, 1)
	b := func(order string, n int64) stock.SlotMove {
		return stock.SlotMove{Movement: stock.LockMovement(order, "B", stock.MustQty(n)), Slot: -1}
	}
	entries, errs, sums := s.Walk([]stock.MoveGroup{
		group(take("first", 3)),
		group(take("too-big", 2), b("too-big", 2)), // A fits, B does not: none of it is taken
		group(take("fits", 2)),                     // what too-big would have taken is still there
		group(take("late", 1)),                     // nothing left
	}, 0)
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], stock.ErrInsufficientStock)
	assert.NoError(t, errs[2])
	assert.ErrorIs(t, errs[3], stock.ErrInsufficientStock)
	assert.Empty(t, entries[1])
	assert.Equal(t, stock.Quantities{OnHand: 5, Locked: 3}, entries[2][0].Before, "the second take starts where the first ended")
	assert.Equal(t, map[stock.SlotKey]stock.Quantities{{SKU: "A", Slot: 0}: {Locked: 5}}, sums, "only accepted groups move the slots")
	assert.Equal(t, "fits/A/lock", entries[2][0].IdempotencyKey)
}

func TestSpreadEvensOutTheSlots(t *testing.T) {
	type transfer struct {
		From, To int
		Qty      int64
	}
	for _, tc := range []struct {
		name  string
		slots *stock.Slots
		want  []transfer
	}{
		{"the first slots get the remainder", held(true, 3, 10, 0, 0), []transfer{{0, 1, 3}, {0, 2, 3}}},
		{"retired slots hand over all of theirs", held(true, 1, 2, 5), []transfer{{1, 0, 5}}},
		{"a full slot gives to each short one", held(true, 2, 1, 7), []transfer{{1, 0, 3}}},
		{"even slots move nothing", held(true, 2, 3, 3), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moves, err := tc.slots.Spread("A")
			require.NoError(t, err)
			var got []transfer
			for i := 0; i+1 < len(moves); i += 2 {
				out, in := moves[i], moves[i+1]
				assert.Equal(t, []stock.ChangeType{stock.ChangeRebalance, stock.ChangeRebalance}, []stock.ChangeType{out.Type, in.Type})
				assert.Equal(t, -out.Qty.Int64(), out.Delta.OnHand, "out of a slot")
				assert.Equal(t, in.Qty.Int64(), in.Delta.OnHand, "into another")
				got = append(got, transfer{out.Slot, in.Slot, out.Qty.Int64()})
			}
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := stock.NewSlots(true).Spread("A")
	assert.ErrorIs(t, err, stock.ErrUnknownSKU)
}

func TestDemandListsWhatTheFirstTryLocks(t *testing.T) {
	b := stock.SlotMove{Movement: stock.LockMovement("o", "B", stock.MustQty(2)), Slot: -1}
	fixedB := stock.SlotMove{Movement: stock.LockMovement("o", "B", stock.MustQty(1)), Slot: 3}
	fixedA := stock.SlotMove{Movement: stock.LockMovement("o", "A", stock.MustQty(1)), Slot: 1}
	fixed, needs, ok := stock.Demand([]stock.MoveGroup{group(b, take("o", 1), fixedB), group(take("p", 4), fixedA, fixedA)})
	require.True(t, ok)
	assert.Equal(t, []stock.SlotKey{{SKU: "A", Slot: 1}, {SKU: "B", Slot: 3}}, fixed, "in (SKU, slot) order, once each")
	assert.Equal(t, []stock.SlotNeed{{SKU: "A", Qty: 5}, {SKU: "B", Qty: 2}}, needs, "what is taken, summed per SKU")

	arrive := stock.SlotMove{Movement: stock.PurchaseInboundMovement("A", stock.MustQty(1)), Slot: -1}
	_, _, ok = stock.Demand([]stock.MoveGroup{group(arrive)})
	assert.False(t, ok, "arriving stock without a slot is placed only with every slot held")
}
