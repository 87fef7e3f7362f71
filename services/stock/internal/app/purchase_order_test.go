package app_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// placeOrder places a purchase order of n units of sku under key.
func placeOrder(t *testing.T, svc *app.Service, sku string, n int64, key string) stock.PurchaseOrder {
	t.Helper()
	p, err := stock.NewPurchaseOrder(sku, stock.MustQty(n), "supplier A", "buyer")
	require.NoError(t, err)
	p, dup, err := svc.PlacePurchaseOrder(context.Background(), p, key)
	require.NoError(t, err)
	require.False(t, dup)
	return p
}

// withPurchaseOrder is a service with CUP-1 of onHand units and a purchase order of it for
// expected more (key po-1).
func withPurchaseOrder(t *testing.T, onHand, expected int64) (*app.Service, stock.PurchaseOrder) {
	t.Helper()
	svc := newService(t)
	_, err := svc.CreateSKU(context.Background(), "CUP-1", onHand, "t")
	require.NoError(t, err)
	return svc, placeOrder(t, svc, "CUP-1", expected, "po-1")
}

func requireFigures(t *testing.T, svc *app.Service, sku string, want stock.Quantities) {
	t.Helper()
	got, err := svc.GetSKU(context.Background(), sku)
	require.NoError(t, err)
	require.Equal(t, want, got.Quantities)
}

func TestAPurchaseOrderIsReceivedInParts(t *testing.T) {
	for _, slots := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d slots", slots), func(t *testing.T) {
			ctx := context.Background()
			svc := newService(t)
			mode{slots: slots}.createSKUs(t, svc, 0, "CUP-1")
			p := placeOrder(t, svc, "CUP-1", 100, "po-1")
			assert.Equal(t, stock.PurchaseOrderOpen, p.Status())
			requireFigures(t, svc, "CUP-1", stock.Quantities{Incoming: 100})

			receive := func(n int64, key string) (stock.PurchaseOrder, error) {
				p, _, err := svc.ReceivePurchaseOrder(ctx, p.ID, stock.MustQty(n), key, "warehouse", "")
				return p, err
			}
			p, err := receive(30, "r1")
			require.NoError(t, err)
			p, err = receive(50, "r2")
			require.NoError(t, err)
			assert.Equal(t, stock.PurchaseOrderPartiallyReceived, p.Status())
			assert.Equal(t, int64(80), p.Received)
			requireFigures(t, svc, "CUP-1", stock.Quantities{OnHand: 80, Incoming: 20})

			_, err = receive(21, "r3")
			require.ErrorIs(t, err, stock.ErrOverReceipt)
			requireFigures(t, svc, "CUP-1", stock.Quantities{OnHand: 80, Incoming: 20})

			p, err = receive(20, "r3")
			require.NoError(t, err)
			assert.Equal(t, stock.PurchaseOrderReceived, p.Status())
			_, err = receive(1, "r4")
			require.ErrorIs(t, err, stock.ErrPurchaseOrderNotOpen)
			requireFigures(t, svc, "CUP-1", stock.Quantities{OnHand: 100})

			require.Len(t, p.Receipts, 3)
			for i, n := range []int64{30, 50, 20} {
				assert.Equal(t, n, p.Receipts[i].Qty)
				assert.Equal(t, "warehouse", p.Receipts[i].Operator)
			}
			if slots > 1 {
				avail := slotAvailable(t, svc, "CUP-1")
				assert.Equal(t, map[int]int64{0: 34, 1: 33, 2: 33}, avail, "receipts are spread over the slots")
			}
			requireConsistent(t, svc)
		})
	}
}

func TestClosingAPurchaseOrderTakesTheRestOutOfIncoming(t *testing.T) {
	ctx := context.Background()
	svc, p := withPurchaseOrder(t, 5, 100)
	other := placeOrder(t, svc, "CUP-1", 10, "po-2")
	_, _, err := svc.ReceivePurchaseOrder(ctx, p.ID, stock.MustQty(30), "r1", "warehouse", "")
	require.NoError(t, err)

	p, dup, err := svc.ClosePurchaseOrder(ctx, p.ID, "buyer-2")
	require.NoError(t, err)
	assert.False(t, dup)
	assert.Equal(t, stock.PurchaseOrderClosed, p.Status())
	assert.Equal(t, "buyer-2", p.ClosedBy)
	requireFigures(t, svc, "CUP-1", stock.Quantities{OnHand: 35, Incoming: 10})

	again, dup, err := svc.ClosePurchaseOrder(ctx, p.ID, "buyer-3")
	require.NoError(t, err)
	assert.True(t, dup, "closing again changes nothing")
	assert.Equal(t, "buyer-2", again.ClosedBy)
	_, _, err = svc.ReceivePurchaseOrder(ctx, p.ID, stock.MustQty(1), "r2", "warehouse", "")
	require.ErrorIs(t, err, stock.ErrPurchaseOrderNotOpen)
	requireFigures(t, svc, "CUP-1", stock.Quantities{OnHand: 35, Incoming: 10})

	entries, err := svc.Ledger(ctx, "CUP-1", app.LedgerQuery{Limit: 100, Types: []stock.ChangeType{stock.ChangePurchaseCancelled}})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, int64(70), entries[0].Qty)
	assert.Equal(t, "buyer-2", entries[0].Operator)
	assert.Equal(t, fmt.Sprintf("purchase order %d: closed, 70 of 100 never arrived", p.ID), entries[0].Remark)

	_, _, err = svc.ReceivePurchaseOrder(ctx, other.ID, stock.MustQty(10), "r1", "warehouse", "")
	require.NoError(t, err)
	_, _, err = svc.ClosePurchaseOrder(ctx, other.ID, "buyer-2")
	require.ErrorIs(t, err, stock.ErrPurchaseOrderNotOpen, "a received order has nothing to close")
	requireConsistent(t, svc)
}

func TestPurchaseOrderReplaysChangeNothing(t *testing.T) {
	ctx := context.Background()
	svc, p := withPurchaseOrder(t, 0, 100)

	po, err := stock.NewPurchaseOrder("CUP-1", stock.MustQty(100), "supplier A", "buyer")
	require.NoError(t, err)
	again, dup, err := svc.PlacePurchaseOrder(ctx, po, "po-1")
	require.NoError(t, err)
	assert.True(t, dup)
	assert.Equal(t, p.ID, again.ID)
	po.Expected = 99
	_, _, err = svc.PlacePurchaseOrder(ctx, po, "po-1")
	require.ErrorIs(t, err, stock.ErrIdempotencyReuse)
	requireFigures(t, svc, "CUP-1", stock.Quantities{Incoming: 100})

	first, dup, err := svc.ReceivePurchaseOrder(ctx, p.ID, stock.MustQty(30), "r1", "warehouse", "")
	require.NoError(t, err)
	assert.False(t, dup)
	replay, dup, err := svc.ReceivePurchaseOrder(ctx, p.ID, stock.MustQty(30), "r1", "warehouse", "")
	require.NoError(t, err)
	assert.True(t, dup)
	assert.Equal(t, first, replay)
	_, _, err = svc.ReceivePurchaseOrder(ctx, p.ID, stock.MustQty(31), "r1", "warehouse", "")
	require.ErrorIs(t, err, stock.ErrIdempotencyReuse)
	requireFigures(t, svc, "CUP-1", stock.Quantities{OnHand: 30, Incoming: 70})
	requireConsistent(t, svc)
}

// Receipts of one order are decided one at a time: of many racing for the last units, the
// ones that fit are taken and no more.
func TestRacingReceiptsNeverOverReceive(t *testing.T) {
	ctx := context.Background()
	svc, p := withPurchaseOrder(t, 0, 100)

	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for i := range 25 {
		wg.Go(func() {
			_, _, err := svc.ReceivePurchaseOrder(ctx, p.ID, stock.MustQty(10), fmt.Sprintf("r%d", i), "warehouse", "")
			if err == nil {
				mu.Lock()
				taken++
				mu.Unlock()
				return
			}
			assert.ErrorIs(t, err, stock.ErrPurchaseOrderNotOpen)
		})
	}
	wg.Wait()
	assert.Equal(t, 10, taken)
	p, err := svc.GetPurchaseOrder(ctx, p.ID)
	require.NoError(t, err)
	assert.Equal(t, stock.PurchaseOrderReceived, p.Status())
	assert.Len(t, p.Receipts, 10)
	requireFigures(t, svc, "CUP-1", stock.Quantities{OnHand: 100})
	requireConsistent(t, svc)
}

// A receipt not tied to an order (POST /receipts) draws on the same incoming: when it has taken
// what an order expects, the order's receipt is refused and nothing changes.
func TestAnUntiedReceiptCanLeaveAnOrderShortOfIncoming(t *testing.T) {
	ctx := context.Background()
	svc, p := withPurchaseOrder(t, 0, 10)
	_, _, err := svc.ReceivePurchase(ctx, "CUP-1", stock.MustQty(8), "untied", "warehouse", "")
	require.NoError(t, err)
	_, _, err = svc.ReceivePurchaseOrder(ctx, p.ID, stock.MustQty(5), "r1", "warehouse", "")
	require.ErrorIs(t, err, stock.ErrInsufficientStock)
	p, err = svc.GetPurchaseOrder(ctx, p.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(0), p.Received)
	requireFigures(t, svc, "CUP-1", stock.Quantities{OnHand: 8, Incoming: 2})
	requireConsistent(t, svc)
}
