package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cross-service reconcile jobs, against the running system. TestMain turns their schedules
// off (intervals 0) so each test triggers them itself, through the admin API.

// reconcile runs job on svc through POST /v1/admin/reconcile/{job} and returns the report's
// findings about one of ids (other tests' leftovers are logged, not asserted).
func (c client) reconcile(svc, job, mode string, ids ...string) []map[string]any {
	c.t.Helper()
	status, rep := c.call("POST", sys.URLs[svc]+"/v1/admin/reconcile/"+job+"?mode="+mode, nil, nil)
	require.Equal(c.t, http.StatusOK, status, "%v", rep)
	require.Equal(c.t, job, rep["job"])
	require.Equal(c.t, mode, rep["mode"])
	raw, _ := json.MarshalIndent(rep, "", "  ")
	c.t.Logf("%s %s %s:\n%s", svc, job, mode, raw)
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var mine []map[string]any
	for _, f := range rep["findings"].([]any) {
		f := f.(map[string]any)
		idm, _ := f["ids"].(map[string]any)
		if want[str(idm["order_id"])] || want[str(idm["payment_id"])] {
			mine = append(mine, f)
		}
	}
	return mine
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func jetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(sys.NATSURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// dropMessage deletes from stream the message on subject that mentions orderID, waiting for
// it to be published first: the event is lost before its consumer sees it.
func dropMessage(t *testing.T, stream, subject, orderID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := jetStream(t).Stream(ctx, stream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, err := s.GetLastMsgForSubject(ctx, subject)
		if err != nil || !contains(m.Data, orderID) {
			return false
		}
		require.NoError(t, s.DeleteMsg(ctx, m.Sequence))
		return true
	}, 15*time.Second, 20*time.Millisecond, "%s for %s never reached %s", subject, orderID, stream)
}

func restart(t *testing.T, svc string) {
	t.Helper()
	require.NoError(t, sys.Start(context.Background(), svc))
	require.NoError(t, sys.WaitReady(context.Background(), svc, 60*time.Second))
}

// A payment.succeeded is lost before stock sees it (stock is down, the message is deleted):
// the order stays awaiting_payment though paid. paid_not_sold finds it, re-drives it, and the
// order is sold through the normal path.
func TestReconcilePaidNotSold(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 10)
	id := c.order("10m", item{SKU: sku, Qty: 2, UnitPrice: 100})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	require.NoError(t, sys.Kill("stock"))
	status, body := c.pay(id, 200, "txn-"+randomHex(4))
	require.Equal(t, http.StatusOK, status, "%v", body)
	dropMessage(t, "PAYMENT", "payment.succeeded", id)
	restart(t, "stock")
	time.Sleep(time.Second)
	require.Equal(t, "awaiting_payment", c.getOrder(id)["status"])

	check := c.reconcile("payment-adapter", "paid_not_sold", "check", id)
	require.Len(t, check, 1)
	assert.Equal(t, "paid_not_sold", check[0]["kind"])
	assert.Equal(t, false, check[0]["repaired"])
	assert.Equal(t, [4]float64{10, 8, 2, 0}, figures(c, sku), "check mode changes nothing")

	repair := c.reconcile("payment-adapter", "paid_not_sold", "repair", id)
	require.Len(t, repair, 1)
	assert.Equal(t, true, repair[0]["repaired"], "%v", repair[0])
	assert.Contains(t, repair[0]["detail"], "payment.succeeded re-published (1)")
	c.waitStatus(id, "paid", 20*time.Second)

	assert.Empty(t, c.reconcile("payment-adapter", "paid_not_sold", "check", id))
	assert.Equal(t, [4]float64{10, 8, 0, 2}, figures(c, sku))
	c.requireConsistent()
}

// Locks whose order the order service does not know, or has made terminal behind stock's
// back, are released by orphan_locks.
func TestReconcileOrphanLocks(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 10)
	ghost := "ghost-" + randomHex(4)
	status, body := c.call("POST", sys.URLs["stock"]+"/v1/internal/locks",
		map[string]any{"order_id": ghost, "items": []map[string]any{{"sku": sku, "qty": 3}}, "payment_timeout": "30m"}, nil)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	cancelled := c.order("30m", item{SKU: sku, Qty: 2, UnitPrice: 100})
	c.waitStatus(cancelled, "awaiting_payment", 10*time.Second)
	open := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 100})
	c.waitStatus(open, "awaiting_payment", 10*time.Second)
	execSQL(t, "order", `UPDATE orders SET status = 'cancelled' WHERE id = $1`, cancelled)

	check := c.reconcile("stock", "orphan_locks", "check", ghost, cancelled, open)
	assert.ElementsMatch(t, []string{ghost, cancelled}, findingOrders(check))
	assert.Equal(t, [4]float64{10, 4, 6, 0}, figures(c, sku))

	repair := c.reconcile("stock", "orphan_locks", "repair", ghost, cancelled, open)
	assert.ElementsMatch(t, []string{ghost, cancelled}, findingOrders(repair))
	for _, f := range repair {
		assert.Equal(t, true, f["repaired"], "%v", f)
	}
	assert.Empty(t, c.reconcile("stock", "orphan_locks", "check", ghost, cancelled, open))
	assert.Equal(t, [4]float64{10, 9, 1, 0}, figures(c, sku))
	assert.Equal(t, 2, countLedger(t, c, sku, "release_cancel"))
	assert.Equal(t, "awaiting_payment", c.getOrder(open)["status"], "an open order keeps its lock")
	c.requireConsistent()
}

// The order service misses stock.released (it is down, the message is deleted): the order
// stays awaiting_payment past its deadline. stuck_orders asks stock and closes it.
func TestReconcileStuckOrders(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 10)
	id := c.order("2s", item{SKU: sku, Qty: 2, UnitPrice: 100})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	require.NoError(t, sys.Kill("order"))
	dropMessage(t, "STOCK", "stock.released", id)
	restart(t, "order")
	time.Sleep(time.Second)
	require.Equal(t, "awaiting_payment", c.getOrder(id)["status"])
	assert.Equal(t, [4]float64{10, 10, 0, 0}, figures(c, sku), "stock released it")

	check := c.reconcile("order", "stuck_orders", "check", id)
	require.Len(t, check, 1)
	assert.Contains(t, check[0]["detail"], "locks released → closed")
	assert.Equal(t, false, check[0]["repaired"])

	repair := c.reconcile("order", "stuck_orders", "repair", id)
	require.Len(t, repair, 1)
	assert.Equal(t, true, repair[0]["repaired"], "%v", repair[0])
	assert.Equal(t, "closed", c.getOrder(id)["status"])
	assert.Empty(t, c.reconcile("order", "stuck_orders", "check", id))
	c.requireConsistent()
}

// Every service serves its jobs and their stored runs; bad input is a 4xx with a code.
func TestReconcileAdminAPI(t *testing.T) {
	c := client{t}
	for svc, job := range map[string]string{"stock": "ledger_summary", "order": "stuck_orders", "payment-adapter": "paid_not_sold", "timeout": "outbox"} {
		c.reconcile(svc, job, "check")
		status, body := c.call("GET", sys.URLs[svc]+"/v1/admin/reconcile/runs?job="+job+"&limit=1", nil, nil)
		require.Equal(t, http.StatusOK, status, "%v", body)
		require.Len(t, body["runs"], 1, svc)
		status, body = c.call("POST", sys.URLs[svc]+"/v1/admin/reconcile/nope", nil, nil)
		assert.Equal(t, http.StatusNotFound, status)
		assert.Equal(t, "unknown_job", body["error"].(map[string]any)["code"])
		status, body = c.call("POST", sys.URLs[svc]+"/v1/admin/reconcile/"+job+"?mode=fix", nil, nil)
		assert.Equal(t, http.StatusBadRequest, status)
		assert.Equal(t, "invalid_mode", body["error"].(map[string]any)["code"])
	}
}

func findingOrders(fs []map[string]any) []string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, str(f["ids"].(map[string]any)["order_id"]))
	}
	return ids
}

func execSQL(t *testing.T, svc, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, sys.ServiceDatabaseURL(svc))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err)
}
