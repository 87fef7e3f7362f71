package stock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

func TestPurchaseOrderReceiptsAndClose(t *testing.T) {
	closed := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	po := func(received int64, isClosed bool) stock.PurchaseOrder {
		p := stock.PurchaseOrder{ID: 7, SKU: "CUP-1", Expected: 100, Received: received}
		if isClosed {
			p.ClosedAt = &closed
		}
		return p
	}
	cases := map[string]struct {
		po      stock.PurchaseOrder
		receive int64
		status  stock.PurchaseOrderStatus
		delta   stock.Quantities
		err     error
	}{
		"open takes a part":            {po(0, false), 30, stock.PurchaseOrderOpen, stock.Quantities{Incoming: -30, OnHand: 30}, nil},
		"partial takes the rest":       {po(80, false), 20, stock.PurchaseOrderPartiallyReceived, stock.Quantities{Incoming: -20, OnHand: 20}, nil},
		"more than expected is over":   {po(80, false), 21, stock.PurchaseOrderPartiallyReceived, stock.Quantities{}, stock.ErrOverReceipt},
		"received takes nothing":       {po(100, false), 1, stock.PurchaseOrderReceived, stock.Quantities{}, stock.ErrPurchaseOrderNotOpen},
		"closed takes nothing":         {po(40, true), 1, stock.PurchaseOrderClosed, stock.Quantities{}, stock.ErrPurchaseOrderNotOpen},
		"closed unreceived is closed":  {po(0, true), 1, stock.PurchaseOrderClosed, stock.Quantities{}, stock.ErrPurchaseOrderNotOpen},
		"a receipt of everything fits": {po(0, false), 100, stock.PurchaseOrderOpen, stock.Quantities{Incoming: -100, OnHand: 100}, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.status, c.po.Status())
			m, err := c.po.Receive(stock.MustQty(c.receive), "box 3")
			require.ErrorIs(t, err, c.err)
			assert.Equal(t, c.delta, m.Delta)
			if err == nil {
				assert.Equal(t, stock.ChangePurchaseInbound, m.Type)
				assert.Equal(t, "purchase order 7: box 3", m.Remark, "the ledger row names its order")
			}
		})
	}
}

func TestClosingAPurchaseOrderCancelsWhatNeverArrived(t *testing.T) {
	p := stock.PurchaseOrder{ID: 7, SKU: "CUP-1", Expected: 100, Received: 30}
	m, ok, err := p.Close()
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, stock.ChangePurchaseCancelled, m.Type)
	assert.Equal(t, stock.Quantities{Incoming: -70}, m.Delta)
	assert.Equal(t, "purchase order 7: closed, 70 of 100 never arrived", m.Remark)

	now := time.Now()
	p.ClosedAt = &now
	_, ok, err = p.Close()
	require.NoError(t, err)
	assert.False(t, ok, "closing a closed order moves nothing")

	_, _, err = stock.PurchaseOrder{ID: 8, SKU: "CUP-1", Expected: 5, Received: 5}.Close()
	assert.ErrorIs(t, err, stock.ErrPurchaseOrderNotOpen, "a received order has nothing to close")
}

func TestNewPurchaseOrderValidates(t *testing.T) {
	_, err := stock.NewPurchaseOrder("has space", stock.MustQty(1), "", "ops")
	assert.ErrorIs(t, err, stock.ErrBadSKU)
	_, err = stock.NewPurchaseOrder("CUP-1", stock.MustQty(1), strings.Repeat("r", stock.MaxRemark+1), "ops")
	assert.ErrorIs(t, err, stock.ErrBadRemark)
	p, err := stock.NewPurchaseOrder("CUP-1", stock.MustQty(9), "", "ops")
	require.NoError(t, err)
	assert.Equal(t, stock.Quantities{Incoming: 9}, p.Expect().Delta)
}
