package history

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// order gives ops the order id and, for stock operations, ledger ids in their order.
func order(id string, ops ...Op) []Op {
	out := make([]Op, len(ops))
	for i, o := range ops {
		o.OrderID = id
		if o.Kind != ReadStatus && o.Kind != PayAcked {
			o.Seq = int64(i + 1)
		}
		out[i] = o
	}
	return out
}

func op(k Kind, sku string) Op  { return Op{Kind: k, SKU: sku} }
func relock(sku string) Op      { return Op{Kind: Sell, SKU: sku, Relocked: true} }
func status(s string) Op        { return Op{Kind: ReadStatus, Status: s} }
func paid() Op                  { return Op{Kind: PayAcked} }
func ledger(kinds ...Kind) []Op { return ledgerOf("A", kinds...) }
func ledgerOf(sku string, kinds ...Kind) []Op {
	ops := make([]Op, len(kinds))
	for i, k := range kinds {
		ops[i] = op(k, sku)
	}
	return ops
}

func then(ops []Op, more ...Op) []Op { return append(ops, more...) }

func TestCheck(t *testing.T) {
	type tc struct {
		name string
		ops  []Op
		ok   bool
		why  string // in the failure's description
	}
	for _, c := range []tc{
		// Histories the system may produce.
		{name: "lock then sell is paid", ok: true, ops: then(ledger(Lock, Sell), status("paid"))},
		{name: "lock then timeout is closed", ok: true, ops: then(ledger(Lock, ReleaseTimeout), status("closed"))},
		{name: "lock then cancel is cancelled", ok: true, ops: then(ledger(Lock, ReleaseCancel), status("cancelled"))},
		{name: "late payment after cancel re-locks and sells", ok: true,
			ops: then(ledger(Lock, ReleaseCancel), relock("A"), paid(), status("paid"))},
		{name: "sold then refunded restocks", ok: true, ops: then(ledger(Lock, Sell, RefundRestock), status("refunded"))},
		{name: "shipped then returned restocks", ok: true, ops: then(ledger(Lock, Sell, Ship, RefundRestock), status("refunded"))},
		{name: "shipped order", ok: true, ops: then(ledger(Lock, Sell, Ship), status("shipped"))},
		{name: "refund requested, restock pending", ok: true, ops: then(ledger(Lock, Sell), status("refund_pending"))},
		{name: "rejected order never locked", ok: true, ops: []Op{status("rejected")}},
		{name: "pending order not locked yet", ok: true, ops: []Op{status("pending")}},
		{name: "awaiting payment holds its lock", ok: true, ops: then(ledger(Lock), status("awaiting_payment"))},
		{name: "cancelled before stock locked it", ok: true, ops: []Op{status("cancelled")}},
		{name: "late payment that found no stock is refunded", ok: true,
			ops: then(ledger(Lock, ReleaseTimeout), paid(), status("refunded"))},
		{name: "acknowledged payment sold the order", ok: true, ops: then([]Op{paid()}, then(ledger(Lock, Sell), status("paid"))...)},
		{name: "every line of a two-line order sold", ok: true,
			ops: then(append(ledgerOf("A", Lock), then(ledgerOf("B", Lock), op(Sell, "A"), op(Sell, "B"))...), status("paid"))},
		{name: "stock operations without a read", ok: true, ops: ledger(Lock, ReleaseTimeout)},

		// Histories that break the model.
		{name: "double release", why: "release_cancel A [ledger #3", ops: ledger(Lock, ReleaseTimeout, ReleaseCancel)},
		{name: "same release twice", why: "needs A locked, and it is released", ops: ledger(Lock, ReleaseTimeout, ReleaseTimeout)},
		{name: "sell twice", why: "then sell A [ledger #3", ops: ledger(Lock, Sell, Sell)},
		{name: "release after sell", why: "release_timeout A [ledger #3", ops: ledger(Lock, Sell, ReleaseTimeout)},
		{name: "refund without sell", why: "needs A sold or shipped, and it is locked", ops: ledger(Lock, RefundRestock)},
		{name: "refund of a released lock", why: "refund_restock", ops: ledger(Lock, ReleaseCancel, RefundRestock)},
		{name: "sell without lock", why: "needs A locked, and it is none", ops: ledger(Sell)},
		{name: "second lock", why: "then lock A", ops: ledger(Lock, Lock)},
		{name: "re-locking sell of a held lock", why: "needs A released, and it is locked", ops: then(ledger(Lock), relock("A"))},
		{name: "plain sell of a released lock", why: "needs A locked, and it is released", ops: ledger(Lock, ReleaseTimeout, Sell)},
		{name: "ship before sale", why: "then ship A", ops: ledger(Lock, Ship)},
		{name: "paid order with a released lock", why: "an order paid needs sold, and A is released",
			ops: then(ledger(Lock, ReleaseTimeout), status("paid"))},
		{name: "closed order whose lock was sold", why: "an order closed needs released, and A is sold",
			ops: then(ledger(Lock, Sell), status("closed"))},
		{name: "rejected order that locked", why: "an order rejected", ops: then(ledger(Lock), status("rejected"))},
		{name: "awaiting payment with nothing locked", why: "stock never locked it", ops: []Op{status("awaiting_payment")}},
		{name: "paid order never sold", why: "stock never locked it", ops: []Op{status("paid")}},
		{name: "two-line order paid with one line released", why: "B is released",
			ops: then(append(ledgerOf("A", Lock, Sell), ledgerOf("B", Lock, ReleaseTimeout)...), status("paid"))},
		{name: "acknowledged payment lost: order closed", why: "a payment was acknowledged, and the order ended closed",
			ops: then(ledger(Lock, ReleaseTimeout), paid(), status("closed"))},
		{name: "order unknown to the order service", why: "no such order", ops: then(ledger(Lock, Sell), status(""))},
		{name: "unknown change type", why: `"restock" is no step of a lock`, ops: ledger(Lock, "restock")},
		{name: "unknown order status", why: `unknown order status "lost"`, ops: []Op{status("lost")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Check(order("o1", c.ops...))
			assert.Equal(t, c.ok, res.OK, "%s", res)
			assert.Equal(t, 1, res.Orders)
			assert.Equal(t, len(c.ops), res.Operations)
			if c.ok {
				assert.Zero(t, res.Failed)
				assert.Empty(t, res.Failures)
				return
			}
			assert.Equal(t, 1, res.Failed)
			require.Len(t, res.Failures, 1)
			assert.Equal(t, "o1", res.Failures[0].OrderID)
			assert.Contains(t, res.Failures[0].Description, c.why)
		})
	}
}

// TestCheckOrdersStockOperationsBySeq: the ledger's id, not the slice, orders an order's rows.
func TestCheckOrdersStockOperationsBySeq(t *testing.T) {
	ops := []Op{
		{OrderID: "o1", Kind: ReadStatus, Status: "paid"},
		{OrderID: "o1", Kind: Sell, SKU: "A", Seq: 90},
		{OrderID: "o1", Kind: Lock, SKU: "A", Seq: 12},
	}
	assert.True(t, Check(ops).OK)

	ops[1].Seq = 5 // now the sale comes first
	res := Check(ops)
	require.False(t, res.OK)
	assert.Contains(t, res.Failures[0].Description, "order o1: sell A → lock A → status paid")
	assert.Contains(t, res.Failures[0].Description, "then sell A [ledger #5")
}

// TestCheckNamesOnlyTheFailedOrders: one bad order among many good ones, in any order.
func TestCheckNamesOnlyTheFailedOrders(t *testing.T) {
	var ops []Op
	for i := range 50 {
		ops = append(ops, order(fmt.Sprintf("good-%02d", i), then(ledger(Lock, Sell), paid(), status("paid"))...)...)
	}
	ops = append(ops, order("bad", then(ledger(Lock, ReleaseTimeout, ReleaseCancel), status("closed"))...)...)
	rand.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })

	res := Check(ops)
	assert.False(t, res.OK)
	assert.Equal(t, 51, res.Orders)
	assert.Equal(t, 50*4+4, res.Operations)
	assert.Equal(t, 1, res.Failed)
	require.Len(t, res.Failures, 1)
	assert.Equal(t, "bad", res.Failures[0].OrderID)
	assert.Equal(t, "order bad: lock A → release_timeout A → release_cancel A → status closed; "+
		"fits up to release_timeout A (A=released); then release_cancel A [ledger #3 at ?] is refused: "+
		"it needs A locked, and it is released", res.Failures[0].Description)
}

// TestCheckDescribesAtMostMaxFailures: the count is of every failed order, the descriptions
// of the first MaxFailures by order id.
func TestCheckDescribesAtMostMaxFailures(t *testing.T) {
	var ops []Op
	for i := range MaxFailures + 5 {
		ops = append(ops, order(fmt.Sprintf("o%02d", i), ledger(Lock, Sell, Sell)...)...)
	}
	res := Check(ops)
	assert.False(t, res.OK)
	assert.Equal(t, MaxFailures+5, res.Failed)
	require.Len(t, res.Failures, MaxFailures)
	assert.Equal(t, "o00", res.Failures[0].OrderID)
	assert.Equal(t, "o09", res.Failures[MaxFailures-1].OrderID)
	assert.Contains(t, res.String(), "… and 5 more")
}

func TestResultWriteVisualization(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.html")
	good := Check(order("o1", then(ledger(Lock, Sell), status("paid"))...))
	require.NoError(t, good.WriteVisualization(path))
	assert.NoFileExists(t, path, "nothing to show for a history that fits")

	bad := Check(append(order("o1", then(ledger(Lock, Sell), status("paid"))...),
		order("o2", then(ledger(Lock, Sell, ReleaseTimeout), status("closed"))...)...))
	require.False(t, bad.OK)
	require.NoError(t, bad.WriteVisualization(path))
	html, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(html), "release_timeout A")
	assert.NotContains(t, string(html), "status paid", "only the failed orders are drawn")
}
