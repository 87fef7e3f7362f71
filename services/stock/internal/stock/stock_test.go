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
	sell := (*stock.Lock).Sell
	timeout := func(l *stock.Lock) (stock.Movement, error) { return l.Release(stock.ChangeReleaseTimeout) }
	ship := (*stock.Lock).Ship
	refund := (*stock.Lock).Refund
	cases := map[string]tc{
		"sell held":              {stock.StateLocked, sell, stock.StateSold, stock.Quantities{Locked: -3, Sold: 3}, nil},
		"sell released re-locks": {stock.StateReleased, sell, stock.StateSold, stock.Quantities{Sold: 3}, nil},
		"sell sold":              {stock.StateSold, sell, stock.StateSold, stock.Quantities{}, stock.ErrAlreadyResolved},
		"release held":           {stock.StateLocked, timeout, stock.StateReleased, stock.Quantities{Locked: -3}, nil},
		"release sold":           {stock.StateSold, timeout, stock.StateSold, stock.Quantities{}, stock.ErrAlreadyResolved},
		"release released":       {stock.StateReleased, timeout, stock.StateReleased, stock.Quantities{}, stock.ErrAlreadyResolved},
		"ship sold":              {stock.StateSold, ship, stock.StateShipped, stock.Quantities{Sold: -3, OnHand: -3}, nil},
		"ship held":              {stock.StateLocked, ship, stock.StateLocked, stock.Quantities{}, stock.ErrLockNotHeld},
		"refund sold":            {stock.StateSold, refund, stock.StateRefunded, stock.Quantities{Sold: -3}, nil},
		"refund shipped":         {stock.StateShipped, refund, stock.StateRefunded, stock.Quantities{OnHand: 3}, nil},
		"refund held":            {stock.StateLocked, refund, stock.StateLocked, stock.Quantities{}, stock.ErrLockNotHeld},
		"refund refunded":        {stock.StateRefunded, refund, stock.StateRefunded, stock.Quantities{}, stock.ErrAlreadyResolved},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := stock.RestoreLock("o1", "A", 3, c.from, time.Now())
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

func TestRestoreLockRefusesUnknownState(t *testing.T) {
	_, err := stock.RestoreLock("o1", "A", 1, "lost", time.Now())
	assert.Error(t, err)
}
