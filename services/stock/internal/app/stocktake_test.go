package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// stocktakeSetup is the review's starting point (F7): on_hand 100, of which 20 are sold to an
// order awaiting shipment.
func stocktakeSetup(t *testing.T, m mode) *app.Service {
	t.Helper()
	ctx := context.Background()
	svc := newService(t)
	m.createSKUs(t, svc, 100, "CUP-1")
	res, err := svc.LockForOrder(ctx, nil, "o1", []events.Line{line("CUP-1", 20)}, time.Now().Add(time.Hour), "t")
	require.NoError(t, err)
	require.True(t, res.Locked)
	_, err = svc.SellLocked(ctx, nil, "o1", "pay-1", "t")
	require.NoError(t, err)
	return svc
}

// fileStocktake files alice's count of CUP-1.
func fileStocktake(t *testing.T, svc *app.Service, counted int64) stock.Adjustment {
	t.Helper()
	a, err := stock.NewAdjustment("CUP-1", stock.ChangeStocktake, nil, &counted, "cycle count", "alice")
	require.NoError(t, err)
	a, err = svc.RequestAdjustment(context.Background(), a)
	require.NoError(t, err)
	return a
}

func lastLedgerID(t *testing.T, svc *app.Service) int64 {
	t.Helper()
	entries, err := svc.Ledger(context.Background(), "CUP-1", app.LedgerQuery{Limit: 1000})
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	return entries[len(entries)-1].ID
}

var stocktakeModes = []mode{modes[0], modes[2]} // one slot, four slots

// TestStocktakeKeepsAShipmentBetweenCountAndApproval is F7's sequence: alice counts 100 while
// 20 sold units are still in the warehouse, the order ships (on_hand 80), bob approves. The
// count agreed with the book when it was taken, so nothing moves: on_hand stays 80, not 100,
// and no phantom unit can be sold.
func TestStocktakeKeepsAShipmentBetweenCountAndApproval(t *testing.T) {
	for _, m := range stocktakeModes {
		t.Run(m.name, func(t *testing.T) {
			ctx := context.Background()
			svc := stocktakeSetup(t, m)
			point := lastLedgerID(t, svc)
			a := fileStocktake(t, svc, 100)
			require.NotNil(t, a.CountedAt)
			assert.Equal(t, stock.LedgerPoint{LedgerID: point, OnHand: 100}, *a.CountedAt, "the count is taken at the ledger's point when filed")

			res, err := svc.ShipOrder(ctx, nil, "o1", "t")
			require.NoError(t, err)
			require.True(t, res.Applied)

			a, err = svc.DecideAdjustment(ctx, a.ID, true, "bob")
			require.NoError(t, err)
			assert.Equal(t, stock.AdjustmentApproved, a.State)
			assert.Nil(t, a.LedgerID, "the count found no difference: no stocktake row")
			got, err := svc.GetSKU(ctx, "CUP-1")
			require.NoError(t, err)
			assert.Equal(t, stock.Quantities{OnHand: 80}, got.Quantities, "on_hand stays 80, not 100")

			over, err := svc.LockForOrder(ctx, nil, "o2", []events.Line{line("CUP-1", 81)}, time.Now().Add(time.Hour), "t")
			require.NoError(t, err)
			assert.False(t, over.Locked, "81 units do not exist")
			assert.Equal(t, stock.RejectInsufficient, over.Reason)
			all, err := svc.LockForOrder(ctx, nil, "o3", []events.Line{line("CUP-1", 80)}, time.Now().Add(time.Hour), "t")
			require.NoError(t, err)
			assert.True(t, all.Locked, "80 units do")
			requireConsistent(t, svc)
		})
	}
}

// TestStocktakeKeepsAReceiptBetweenCountAndApproval: alice counts 97 where the book says 100
// (3 missing); 10 units are received; bob approves. The 3 missing units come off, the 10
// received stay: 107, and the stocktake's ledger row says so.
func TestStocktakeKeepsAReceiptBetweenCountAndApproval(t *testing.T) {
	for _, m := range stocktakeModes {
		t.Run(m.name, func(t *testing.T) {
			ctx := context.Background()
			svc := stocktakeSetup(t, m)
			a := fileStocktake(t, svc, 97)
			_, _, err := svc.ExpectPurchase(ctx, "CUP-1", stock.MustQty(10), "po-1", "t", "")
			require.NoError(t, err)
			_, _, err = svc.ReceivePurchase(ctx, "CUP-1", stock.MustQty(10), "po-1", "t", "")
			require.NoError(t, err)

			a, err = svc.DecideAdjustment(ctx, a.ID, true, "bob")
			require.NoError(t, err)
			require.NotNil(t, a.LedgerID)
			got, err := svc.GetSKU(ctx, "CUP-1")
			require.NoError(t, err)
			assert.Equal(t, stock.Quantities{OnHand: 107, Sold: 20}, got.Quantities)

			entries, err := svc.Ledger(ctx, "CUP-1", app.LedgerQuery{After: *a.LedgerID - 1, Limit: 1})
			require.NoError(t, err)
			require.Len(t, entries, 1)
			e := entries[0]
			assert.Equal(t, *a.LedgerID, e.ID)
			assert.Equal(t, stock.ChangeStocktake, e.Type)
			assert.Equal(t, int64(3), e.Qty)
			assert.Equal(t, int64(-3), e.After.OnHand-e.Before.OnHand, "the row moves by the count's difference")
			assert.Equal(t, "bob", e.Operator)
			assert.Equal(t, fmt.Sprintf("cycle count (counted 97 against a book of 100 at ledger row %d)", a.CountedAt.LedgerID), e.Remark)
			if m.slots == 1 {
				assert.Equal(t, stock.Quantities{OnHand: 110, Sold: 20}, e.Before, "before: the figures at approval, receipt included")
				assert.Equal(t, stock.Quantities{OnHand: 107, Sold: 20}, e.After)
			}
			requireConsistent(t, svc)
		})
	}
}

// TestStocktakeThatNoLongerFitsIsRefused: alice counts 40 of a book of 100 (20 sold); a buyer
// then locks 25. Carried forward, the count leaves 40 on hand for 45 locked and sold: the count
// and the movements since cannot both be right, so approval is refused and nothing changes.
func TestStocktakeThatNoLongerFitsIsRefused(t *testing.T) {
	ctx := context.Background()
	svc := stocktakeSetup(t, modes[0])
	a := fileStocktake(t, svc, 40)
	res, err := svc.LockForOrder(ctx, nil, "o2", []events.Line{line("CUP-1", 25)}, time.Now().Add(time.Hour), "t")
	require.NoError(t, err)
	require.True(t, res.Locked)
	before, err := svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	last := lastLedgerID(t, svc)

	_, err = svc.DecideAdjustment(ctx, a.ID, true, "bob")
	require.ErrorIs(t, err, stock.ErrStocktakeConflict)

	after, err := svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, before.Quantities, after.Quantities)
	assert.Equal(t, last, lastLedgerID(t, svc), "no ledger row")
	stored, err := svc.GetAdjustment(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, stock.AdjustmentPending, stored.State, "still pending: reject it and count again")
	requireConsistent(t, svc)
}

// TestStocktakeFiledWithoutALedgerPointIsRefused: a stocktake filed by a version that did not
// record the point (or before the migration) cannot be applied safely.
func TestStocktakeFiledWithoutALedgerPointIsRefused(t *testing.T) {
	ctx := context.Background()
	svc, pool := newServiceAndPool(t, combine.Options{})
	_, err := svc.CreateSKU(ctx, "CUP-1", 100, "t")
	require.NoError(t, err)
	var id int64
	err = pool.QueryRow(ctx, `INSERT INTO adjustment (sku, kind, counted, reason, requested_by)
		VALUES ('CUP-1', 'stocktake', 100, 'old count', 'alice') RETURNING id`).Scan(&id)
	require.NoError(t, err)
	_, err = svc.DecideAdjustment(ctx, id, true, "bob")
	require.ErrorIs(t, err, stock.ErrStocktakeConflict)
	_, err = svc.DecideAdjustment(ctx, id, false, "bob")
	require.NoError(t, err, "it can still be rejected")
}

// TestStocktakeBeyondOneMovementIsRefusedWhenFiled (review F23): a count may be up to 10¹², but
// one movement carries at most stock.MaxQty. A count further than that from the book is
// refused when filed — it could never be approved — and files nothing; one at the limit is
// filed.
func TestStocktakeBeyondOneMovementIsRefusedWhenFiled(t *testing.T) {
	ctx := context.Background()
	svc := stocktakeSetup(t, modes[0]) // book on_hand 100
	counted := int64(100 + stock.MaxQty + 1)
	a, err := stock.NewAdjustment("CUP-1", stock.ChangeStocktake, nil, &counted, "cycle count", "alice")
	require.NoError(t, err, "the request itself is well formed")
	_, err = svc.RequestAdjustment(ctx, a)
	require.ErrorIs(t, err, stock.ErrBadAdjustment)
	filed, err := svc.Adjustments(ctx, app.AdjustmentQuery{SKU: "CUP-1", Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, filed, "nothing filed")

	a = fileStocktake(t, svc, 100+stock.MaxQty)
	a, err = svc.DecideAdjustment(ctx, a.ID, true, "bob")
	require.NoError(t, err, "a count at the limit applies")
	got, err := svc.GetSKU(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, int64(100+stock.MaxQty), got.OnHand)
	requireConsistent(t, svc)
}
