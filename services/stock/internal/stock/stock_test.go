package stock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

func TestNewQty(t *testing.T) {
	for _, n := range []int64{0, -1, stock.MaxQty + 1} {
		_, err := stock.NewQty(n)
		assert.ErrorIs(t, err, stock.ErrBadQuantity, "%d", n)
	}
	q, err := stock.NewQty(stock.MaxQty)
	require.NoError(t, err)
	_, err = q.Add(stock.MustQty(1))
	assert.ErrorIs(t, err, stock.ErrBadQuantity, "overflowing sum")
}

func TestNormalizeLinesMergesAndSorts(t *testing.T) {
	got, err := stock.NormalizeLines([]stock.Line{
		{SKU: "B", Qty: stock.MustQty(1)}, {SKU: "A", Qty: stock.MustQty(2)}, {SKU: "B", Qty: stock.MustQty(3)},
	})
	require.NoError(t, err)
	assert.Equal(t, []stock.Line{{SKU: "A", Qty: stock.MustQty(2)}, {SKU: "B", Qty: stock.MustQty(4)}}, got)

	for name, lines := range map[string][]stock.Line{
		"none":     nil,
		"bad sku":  {{SKU: "no spaces", Qty: stock.MustQty(1)}},
		"zero qty": {{SKU: "A"}},
	} {
		_, err := stock.NormalizeLines(lines)
		assert.Error(t, err, name)
	}
}

func TestLockTransitions(t *testing.T) {
	type tc struct {
		from    stock.LockState
		do      func(*stock.Lock) (stock.Movement, error)
		to      stock.LockState
		delta   stock.Quantities
		wantErr error
	}
	// A timeout is judged on stock's clock (now), not the timeout service's; a cancellation
	// is not judged at all.
	deadline := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	timeoutAt := func(now time.Time) func(*stock.Lock) (stock.Movement, error) {
		return func(l *stock.Lock) (stock.Movement, error) { return l.ReleaseTimeout(now) }
	}
	sell := (*stock.Lock).Sell
	timeout, early := timeoutAt(deadline), timeoutAt(deadline.Add(-time.Second))
	cancel := (*stock.Lock).ReleaseCancel
	ship := (*stock.Lock).Ship
	refund := (*stock.Lock).Refund
	cases := map[string]tc{
		"sell held":               {stock.StateLocked, sell, stock.StateSold, stock.Quantities{Locked: -3, Sold: 3}, nil},
		"sell released re-locks":  {stock.StateReleased, sell, stock.StateSold, stock.Quantities{Sold: 3}, nil},
		"sell sold":               {stock.StateSold, sell, stock.StateSold, stock.Quantities{}, stock.ErrAlreadyResolved},
		"release held":            {stock.StateLocked, timeout, stock.StateReleased, stock.Quantities{Locked: -3}, nil},
		"release sold":            {stock.StateSold, timeout, stock.StateSold, stock.Quantities{}, stock.ErrAlreadyResolved},
		"release released":        {stock.StateReleased, timeout, stock.StateReleased, stock.Quantities{}, stock.ErrAlreadyResolved},
		"timeout before deadline": {stock.StateLocked, early, stock.StateLocked, stock.Quantities{}, stock.ErrNotYetDue},
		"timeout after deadline":  {stock.StateLocked, timeoutAt(deadline.Add(time.Hour)), stock.StateReleased, stock.Quantities{Locked: -3}, nil},
		"early timeout of sold":   {stock.StateSold, early, stock.StateSold, stock.Quantities{}, stock.ErrAlreadyResolved},
		"cancel before deadline":  {stock.StateLocked, cancel, stock.StateReleased, stock.Quantities{Locked: -3}, nil},
		"cancel released":         {stock.StateReleased, cancel, stock.StateReleased, stock.Quantities{}, stock.ErrAlreadyResolved},
		"ship sold":               {stock.StateSold, ship, stock.StateShipped, stock.Quantities{Sold: -3, OnHand: -3}, nil},
		"ship held":               {stock.StateLocked, ship, stock.StateLocked, stock.Quantities{}, stock.ErrLockNotHeld},
		"refund sold":             {stock.StateSold, refund, stock.StateRefunded, stock.Quantities{Sold: -3}, nil},
		"refund shipped":          {stock.StateShipped, refund, stock.StateRefunded, stock.Quantities{OnHand: 3}, nil},
		"refund held":             {stock.StateLocked, refund, stock.StateLocked, stock.Quantities{}, stock.ErrLockNotHeld},
		"refund refunded":         {stock.StateRefunded, refund, stock.StateRefunded, stock.Quantities{}, stock.ErrAlreadyResolved},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := stock.RestoreLock("o1", "A", 3, string(c.from), deadline)
			require.NoError(t, err)
			m, err := c.do(l)
			if c.wantErr != nil {
				assert.ErrorIs(t, err, c.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, c.to, l.State())
			assert.Equal(t, c.delta, m.Delta)
		})
	}
}

// TestEarlyTimeoutSaysHowLongUntilDue: the consumer redelivers the message after Wait.
func TestEarlyTimeoutSaysHowLongUntilDue(t *testing.T) {
	deadline := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l, err := stock.RestoreLock("o1", "A", 3, string(stock.StateLocked), deadline)
	require.NoError(t, err)
	_, err = l.ReleaseTimeout(deadline.Add(-90 * time.Second))
	var notDue *stock.NotYetDueError
	require.ErrorAs(t, err, &notDue)
	assert.ErrorIs(t, err, stock.ErrNotYetDue)
	assert.Equal(t, 90*time.Second, notDue.Wait)
}

func TestRestoreLockRefusesUnknownState(t *testing.T) {
	_, err := stock.RestoreLock("o1", "A", 1, "lost", time.Now())
	assert.ErrorIs(t, err, stock.ErrUnknownValue)
}

func TestClosedSetsParseTheirOwnValuesOnly(t *testing.T) {
	for _, s := range stock.LockStates {
		got, err := stock.ParseLockState(string(s))
		assert.NoError(t, err)
		assert.Equal(t, s, got)
	}
	for _, c := range stock.ChangeTypes {
		got, err := stock.ParseChangeType(string(c))
		assert.NoError(t, err)
		assert.Equal(t, c, got)
	}
	for _, a := range stock.AdjustmentStates {
		got, err := stock.ParseAdjustmentState(string(a))
		assert.NoError(t, err)
		assert.Equal(t, a, got)
	}
	for name, parse := range map[string]func(string) error{
		"lock state":       func(s string) error { _, err := stock.ParseLockState(s); return err },
		"change type":      func(s string) error { _, err := stock.ParseChangeType(s); return err },
		"adjustment state": func(s string) error { _, err := stock.ParseAdjustmentState(s); return err },
	} {
		for _, v := range []string{"", "LOCKED", "returned"} {
			assert.ErrorIs(t, parse(v), stock.ErrUnknownValue, "%s %q", name, v)
		}
	}
}

func TestAdjustmentMovement(t *testing.T) {
	ptr := func(n int64) *int64 { return &n }
	stocktake := func(counted, book int64) stock.Adjustment {
		return stock.Adjustment{ID: 7, SKU: "A", Kind: stock.ChangeStocktake, Counted: ptr(counted),
			CountedAt: &stock.LedgerPoint{LedgerID: 3, OnHand: book}, Reason: "count"}
	}
	type tc struct {
		a       stock.Adjustment
		current stock.Quantities
		moves   bool
		delta   int64
		wantErr error
	}
	cases := map[string]tc{
		"count matches the book, a shipment since is kept": {stocktake(100, 100), stock.Quantities{OnHand: 80}, false, 0, nil},
		"a receipt since is kept":                          {stocktake(97, 100), stock.Quantities{OnHand: 110}, true, -3, nil},
		"shrinkage found":                                  {stocktake(90, 100), stock.Quantities{OnHand: 100, Sold: 5}, true, -10, nil},
		"surplus found":                                    {stocktake(105, 100), stock.Quantities{OnHand: 80, Locked: 80}, true, 5, nil},
		"down to exactly locked and sold":                  {stocktake(60, 100), stock.Quantities{OnHand: 100, Locked: 30, Sold: 30}, true, -40, nil},
		"below locked and sold now":                        {stocktake(60, 100), stock.Quantities{OnHand: 100, Locked: 45, Sold: 20}, false, 0, stock.ErrStocktakeConflict},
		"on_hand would go negative":                        {stocktake(10, 100), stock.Quantities{OnHand: 50}, false, 0, stock.ErrStocktakeConflict},
		"filed without a ledger point": {stock.Adjustment{SKU: "A", Kind: stock.ChangeStocktake, Counted: ptr(5), Reason: "old"},
			stock.Quantities{OnHand: 5}, false, 0, stock.ErrStocktakeConflict},
		"manual adjustment moves by its delta": {stock.Adjustment{SKU: "A", Kind: stock.ChangeManualAdjust, Delta: ptr(-3), Reason: "broken"},
			stock.Quantities{OnHand: 10}, true, -3, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m, ok, err := c.a.Movement(c.current)
			if c.wantErr != nil {
				assert.ErrorIs(t, err, c.wantErr)
				assert.False(t, ok, "a refused adjustment moves nothing")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.moves, ok)
			assert.Equal(t, c.delta, m.Delta.OnHand)
			if ok {
				assert.Equal(t, c.a.Kind, m.Type)
				assert.True(t, m.Fits(c.current))
			}
		})
	}
}

func TestNewAdjustmentRefusesTextTheStoreCannotHold(t *testing.T) {
	counted := int64(5)
	for name, reason := range map[string]string{
		"empty":        "",
		"NUL":          "a\x00b",
		"invalid UTF8": "a\xffb",
		"too long":     string(make([]byte, 501)),
	} {
		_, err := stock.NewAdjustment("A", stock.ChangeStocktake, nil, &counted, reason, "alice")
		assert.ErrorIs(t, err, stock.ErrBadAdjustment, name)
	}
	_, err := stock.NewAdjustment("A", stock.ChangeStocktake, nil, &counted, "recount, aisle 4 — étagère", "alice")
	assert.NoError(t, err)
}

func TestValidText(t *testing.T) {
	for s, want := range map[string]bool{"": true, "plain": true, "ünïcode ✓": true, "a\x00b": false, "\x00": false, "a\xffb": false, "\xc3": false} {
		assert.Equal(t, want, stock.ValidText(s), "%q", s)
	}
}
