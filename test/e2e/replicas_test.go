package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/tools/flashsale"
	"github.com/stockflow/stockflow/tools/launcher"
)

// TestTwoReplicasOfEverything runs two processes of every service against the same databases
// and streams (`make up REPLICAS=2`), behind the launcher's round-robin fronts, on a stockflow
// of its own. A flash sale runs through it with both replicas up, then a second while the
// stock replica its SKU's order.created partition is pinned to is SIGKILLed; reconcile jobs are triggered on both replicas at once meanwhile. Then the
// databases themselves say that no message was applied twice (by the effects and events each
// one leaves), that no release fired twice, and that no two runs of one reconcile job
// overlapped; and each replica's own /metrics says that one stock replica locked the sale's
// SKU while both resolved its locks, and that both order replicas did work.
func TestTwoReplicasOfEverything(t *testing.T) {
	start := time.Now()
	rs := upReplicated(t)
	t.Logf("two replicas of everything up in %s", time.Since(start).Round(100*time.Millisecond))
	for _, svc := range launcher.Services {
		require.Equal(t, []string{svc, svc + "-2"}, rs.Replicas(svc))
		require.NotEqual(t, rs.ProcessURL(svc), rs.ProcessURL(svc+"-2"), "each replica on its own port")
		require.NotEqual(t, rs.URLs[svc], rs.ProcessURL(svc), "the service's URL is its front's")
	}
	signer, err := rs.Signer()
	require.NoError(t, err)
	ops := flashsale.NewClient(&http.Client{Timeout: 30 * time.Second}, rs.URLs["order"], rs.URLs["stock"], rs.URLs["payment-adapter"], "").WithSigner(signer)

	// The first sale, both replicas up; reconcile jobs triggered on both stock and both order
	// replicas at once while it runs.
	before := scrapeReplicas(t, rs)
	reconciled := make(chan map[string]int, 1)
	go func() {
		time.Sleep(3 * time.Second) // locks are held by then: orphan_locks asks the order service about each
		reconciled <- triggerReconcile(t, ops, rs)
	}()
	steady := runSale(t, rs, signer, nil)
	outcomes := <-reconciled
	after := scrapeReplicas(t, rs)
	for _, ch := range steady.Checks {
		if ch.Name == flashsale.CheckMetrics {
			// The sale reads stock's /metrics once, through the front: one replica's counters.
			// Both replicas' together must equal the ledger instead.
			continue
		}
		assert.True(t, ch.Pass, "sale with both replicas: %s: %s", ch.Name, ch.Detail)
	}
	locked := func(m map[string]string, name string) float64 {
		return metricSum(m[name], "stockflow_stock_lock_outcomes_total", `outcome="locked"`)
	}
	rejected := func(m map[string]string, name string) float64 {
		return metricSum(m[name], "stockflow_stock_lock_outcomes_total", `outcome="rejected"`)
	}
	resolved := func(m map[string]string, name string) float64 {
		return metricSum(m[name], "stockflow_stock_resolve_outcomes_total")
	}
	// The sale is one SKU, so one order.created partition, pinned to one stock replica: it
	// locks every order, in batches no other replica competes with. payment.succeeded and the
	// timeouts are shared by both.
	var lockedSum, rejectedSum float64
	var pinned []string
	for _, name := range rs.Replicas("stock") {
		l := locked(after, name) - locked(before, name)
		if l > 0 {
			pinned = append(pinned, name)
		}
		lockedSum += l
		rejectedSum += rejected(after, name) - rejected(before, name)
		assert.Positive(t, resolved(after, name)-resolved(before, name), "%s sold or released locks of the sale (shared consumers)", name)
	}
	require.Len(t, pinned, 1, "one stock replica locks the sale's SKU (its order.created partition is pinned to it)")
	assert.Equal(t, float64(steady.LedgerRows["lock"]), lockedSum, "locks counted by both stock replicas = the ledger's lock rows")
	assert.Equal(t, float64(steady.ByStatus["rejected"]), rejectedSum, "rejections counted by both stock replicas = rejected orders")
	for _, name := range rs.Replicas("order") {
		placed := metricSum(after[name], "http_server_request_duration_seconds_count", `http_route="/v1/orders"`, `http_request_method="POST"`) -
			metricSum(before[name], "http_server_request_duration_seconds_count", `http_route="/v1/orders"`, `http_request_method="POST"`)
		awaiting := metricSum(after[name], "stockflow_order_transitions_total", `status="awaiting_payment"`) -
			metricSum(before[name], "stockflow_order_transitions_total", `status="awaiting_payment"`)
		assert.Positive(t, placed, "%s took order placements through the front", name)
		assert.Positive(t, awaiting, "%s applied stock.locked outcomes (shared consumer)", name)
	}
	t.Logf("reconcile triggered on both replicas at once: %v", outcomes)
	for outcome, n := range outcomes {
		assert.Contains(t, []string{"ran", "already_running"}, outcome, "%d answers", n)
	}

	// One order placed under one Idempotency-Key on both order replicas at once: one order.
	placeOnBoth(t, ops, signer, rs)

	// The second sale: the stock replica that locks the sale's SKU is killed while orders
	// arrive, and not started again; the other is pinned within natsx.PinnedTTL and locks the
	// rest, and what the dead one had been sent is redelivered to it after the ack wait.
	victim := pinned[0]
	killed := make(chan error, 1)
	second := runSale(t, rs, signer, func() {
		time.Sleep(2 * time.Second)
		killed <- rs.Kill(victim)
	})
	require.NoError(t, <-killed, "SIGKILL %s", victim)
	assert.True(t, rs.Exited(victim))
	for _, ch := range second.Checks {
		if ch.Name == flashsale.CheckMetrics {
			continue // the killed replica's counters died with it
		}
		assert.True(t, ch.Pass, "sale with %s killed: %s: %s", victim, ch.Name, ch.Detail)
	}
	assert.Positive(t, second.ByStatus["paid"], "%v", second.ByStatus)

	dbs := connectAll(t, rs)
	var keyed int
	require.NoError(t, dbs["order"].QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE idempotency_key = 'both-replicas'`).Scan(&keyed))
	assert.Equal(t, 1, keyed, "one order for one Idempotency-Key sent to both order replicas")
	assertAppliedOnce(t, dbs)
	assertReleasedOnce(t, dbs)
	assertRunsNeverOverlap(t, dbs)
	t.Logf("TestTwoReplicasOfEverything took %s", time.Since(start).Round(100*time.Millisecond))
}

// upReplicated brings up a stockflow of its own with two replicas of each service, every port
// free, its own nats-server, redis-server and paysim, and its own throwaway PostgreSQL
// cluster, as tools/chaos does: eight service processes, with pools of up to 12 connections
// each, beside TestMain's four do not fit in a server's default max_connections of 100 (the
// throwaway cluster allows 400). All of it is stopped and removed when t ends.
func upReplicated(t *testing.T) *launcher.System {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := launcher.Options{
		Root: root, RunDir: t.TempDir(), PGPort: freePort(),
		Ports:     map[string]int{"order": 0, "stock": 0, "payment-adapter": 0, "timeout": 0},
		Replicas:  2,
		RedisPort: freePort(), PaysimPort: freePort(),
		Env: []string{
			"PAYMENT_SANDBOX_SECRET=" + sandboxSecret,
			"ORDER_MIN_PAYMENT_WINDOW=1s",
			"TIMEOUT_SWEEP_INTERVAL=500ms", // both sweepers race the scheduled messages
			"CONSUMER_ACK_WAIT=3s",         // a killed replica's deliveries go to the other in 3 s
			// Both stock replicas' gate-job loops tick every 500 ms: the job's lock decides.
			"RECONCILE_GATE_INTERVAL=500ms",
			// The cross-service jobs run when the test triggers them, on whatever is held now.
			"RECONCILE_ORPHAN_LOCKS_INTERVAL=0", "RECONCILE_ORPHAN_LOCKS_AGE=0s",
			"RECONCILE_STUCK_ORDERS_INTERVAL=0", "RECONCILE_STUCK_ORDERS_GRACE=0s",
			"RECONCILE_PAID_NOT_SOLD_INTERVAL=0", "RECONCILE_LOST_CALLBACKS_INTERVAL=0", "RECONCILE_REFUNDS_INTERVAL=0",
		},
		Log: func(f string, a ...any) { t.Logf("up: "+f, a...) },
	}
	rs, err := launcher.Up(ctx, opts)
	t.Cleanup(func() {
		if rs != nil {
			if err := rs.Stop(); err != nil {
				t.Logf("stop: %v", err)
			}
		}
		if t.Failed() {
			dumpLogs(opts.RunDir)
		}
		if err := launcher.Purge(opts); err != nil { // the cluster lives outside RunDir when we are root
			t.Logf("purge: %v", err)
		}
	})
	require.NoError(t, err, "up with two replicas")
	return rs
}

// runSale runs a small flash sale through the fronts — 100 units, 300 buyers over 5 s, 2 s to
// pay, returning buyers — with during, if given, beside it.
func runSale(t *testing.T, rs *launcher.System, signer *auth.Signer, during func()) *flashsale.Report {
	t.Helper()
	cfg := flashsale.Default()
	cfg.OrderURL, cfg.StockURL, cfg.PaymentURL = rs.URLs["order"], rs.URLs["stock"], rs.URLs["payment-adapter"]
	cfg.SandboxSecret, cfg.Signer = sandboxSecret, signer
	cfg.Units, cfg.Buyers, cfg.Concurrency = 100, 300, 16
	cfg.PaymentTimeout, cfg.ArrivalWindow = 2*time.Second, 5*time.Second
	cfg.RetryDelay, cfg.RetryRatio = time.Second, 0.5
	cfg.SettleTimeout = 30 * time.Second
	cfg.GateLead = time.Second
	cfg.ChartPath = ""
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	if during != nil {
		wg.Go(during)
	}
	rep, err := flashsale.Run(ctx, cfg, io.Discard)
	wg.Wait()
	require.NotNil(t, rep, "%v", err)
	t.Logf("\n%s", rep)
	require.True(t, err == nil || rep.Failed(), "the sale ran to its end: %v", err) // the caller reads the checks
	return rep
}

// scrapeReplicas reads every service process's own /metrics (past the front), by process name.
func scrapeReplicas(t *testing.T, rs *launcher.System) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, svc := range []string{"stock", "order"} {
		for _, name := range rs.Replicas(svc) {
			out[name] = scrapeURL(t, name, rs.ProcessURL(name))
		}
	}
	return out
}

// metricSum adds up the samples of metric whose labels include every one of labels (k="v").
func metricSum(text, metric string, labels ...string) float64 {
	sum := 0.0
	line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + `(\{[^}]*\})? (\S+)$`)
	for _, m := range line.FindAllStringSubmatch(text, -1) {
		if slices.ContainsFunc(labels, func(l string) bool { return !strings.Contains(m[1], l) }) {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// triggerReconcile starts runs of one job on both replicas of a service at once — three calls
// to each — for stock's orphan_locks and ledger_summary and order's stuck_orders, in check mode,
// and counts the answers: "ran", "already_running" (the job's lock held by the other run), or
// anything else by its status.
func triggerReconcile(t *testing.T, ops *flashsale.Client, rs *launcher.System) map[string]int {
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	for svc, jobs := range map[string][]string{"stock": {"orphan_locks", "ledger_summary"}, "order": {"stuck_orders"}} {
		for _, job := range jobs {
			for _, name := range rs.Replicas(svc) {
				for range 3 {
					wg.Go(func() {
						status, err := ops.Do(context.Background(), "reconcile "+job, "POST",
							rs.ProcessURL(name)+"/v1/admin/reconcile/"+job+"?mode=check", nil, nil, nil)
						outcome := "ran"
						var ae *flashsale.APIError
						switch {
						case err == nil:
						case errors.As(err, &ae) && ae.Code == "already_running":
							outcome = "already_running"
						default:
							outcome = fmt.Sprintf("%d %v", status, err)
						}
						mu.Lock()
						outcomes[outcome]++
						mu.Unlock()
					})
				}
			}
		}
	}
	wg.Wait()
	return outcomes
}

// connectAll connects to each service's database of rs, closed when t ends.
func connectAll(t *testing.T, rs *launcher.System) map[string]*pgx.Conn {
	t.Helper()
	dbs := map[string]*pgx.Conn{}
	for _, svc := range launcher.Services {
		conn, err := pgx.Connect(context.Background(), rs.ServiceDatabaseURL(svc))
		require.NoError(t, err, svc)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		dbs[svc] = conn
	}
	return dbs
}

// rows runs a query whose rows are one text each: the problems it finds (the first 20).
func rows(t *testing.T, conn *pgx.Conn, sql string) []string {
	t.Helper()
	r, err := conn.Query(context.Background(), sql)
	require.NoError(t, err, sql)
	out, err := pgx.CollectRows(r, pgx.RowTo[string])
	require.NoError(t, err, sql)
	return out
}

// assertAppliedOnce: no message was applied twice by two replicas (or twice by one), by what
// applying it leaves — the inbox makes a second delivery change nothing, so a second
// application would show as a second effect: no order has two ledger rows of one change type
// for a SKU, no order's history a step twice, and no service's outbox two events of one
// subject for one order (a lock's stock.locked, a deadline's schedule and its
// timeout.expired, an order's payment.succeeded…).
func assertAppliedOnce(t *testing.T, dbs map[string]*pgx.Conn) {
	var n int
	require.NoError(t, dbs["stock"].QueryRow(context.Background(),
		`SELECT count(DISTINCT order_id) FROM stock_ledger WHERE change_type = 'lock'`).Scan(&n))
	require.Positive(t, n, "locks to look at")
	assert.Empty(t, rows(t, dbs["stock"], `
		SELECT order_id || ' has ' || count(*) || ' ' || change_type || ' rows for ' || sku
		  FROM stock_ledger WHERE order_id IS NOT NULL GROUP BY order_id, sku, change_type HAVING count(*) > 1 LIMIT 20`),
		"ledger rows applied twice (of %d locked orders: one lock row each)", n)
	assert.Empty(t, rows(t, dbs["order"], `
		SELECT order_id || ' has "' || status || ': ' || reason || '" ' || count(*) || ' times in its history'
		  FROM order_history GROUP BY order_id, status, reason HAVING count(*) > 1 LIMIT 20`), "order steps applied twice")
	for _, svc := range launcher.Services {
		var events int
		require.NoError(t, dbs[svc].QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&events))
		assert.Positive(t, events, "%s wrote events", svc)
		assert.Empty(t, rows(t, dbs[svc], `
			SELECT subject || ' for order ' || order_id || ' ' || n || ' times'
			  FROM (SELECT subject, convert_from(data, 'UTF8')::jsonb -> 'data' ->> 'order_id' AS order_id, count(*) AS n
			          FROM outbox GROUP BY 1, 2) AS events
			 WHERE order_id IS NOT NULL AND n > 1 LIMIT 20`), "%s's events written twice for one order (of %d)", svc, events)
	}
}

// assertReleasedOnce: no order's lock was released twice — by the two timeout sweepers, their
// scheduled message, a cancel or stock's own overdue job — and the timeout service expired
// each deadline once.
func assertReleasedOnce(t *testing.T, dbs map[string]*pgx.Conn) {
	var n int
	require.NoError(t, dbs["stock"].QueryRow(context.Background(),
		`SELECT count(*) FROM stock_ledger WHERE change_type = 'release_timeout'`).Scan(&n))
	require.Positive(t, n, "timeouts to look at")
	assert.Empty(t, rows(t, dbs["stock"], `
		SELECT order_id || ' released ' || count(*) || ' times (' || string_agg(change_type, ', ') || ') for ' || sku
		  FROM stock_ledger WHERE change_type IN ('release_timeout', 'release_cancel')
		 GROUP BY order_id, sku HAVING count(*) > 1 LIMIT 20`), "orders released more than once (of %d timeouts)", n)
	var expired, deadlines int
	require.NoError(t, dbs["timeout"].QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE state = 'expired'), count(*) FROM deadlines`).Scan(&expired, &deadlines))
	var events int
	require.NoError(t, dbs["timeout"].QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE subject = 'timeout.expired'`).Scan(&events))
	assert.Equal(t, expired, events, "one timeout.expired per expired deadline (of %d deadlines)", deadlines)
}

// assertRunsNeverOverlap: in each service's database no two runs of one reconcile job — from
// either replica, scheduled or triggered — overlap in time. A run without an end (one running
// now, or one whose replica was killed in it) has none to compare; such runs are counted.
func assertRunsNeverOverlap(t *testing.T, dbs map[string]*pgx.Conn) {
	for _, svc := range launcher.Services {
		var runs, open int
		require.NoError(t, dbs[svc].QueryRow(context.Background(),
			`SELECT count(*), count(*) FILTER (WHERE finished IS NULL) FROM reconcile_run`).Scan(&runs, &open))
		t.Logf("%s: %d reconcile runs (%d without an end)", svc, runs, open)
		assert.Empty(t, rows(t, dbs[svc], `
			SELECT a.job || ' run ' || a.id || ' [' || a.started || ', ' || a.finished || '] overlaps run ' || b.id ||
			       ' [' || b.started || ', ' || b.finished || ']'
			  FROM reconcile_run a JOIN reconcile_run b ON a.job = b.job AND a.id < b.id
			 WHERE a.started < b.finished AND b.started < a.finished LIMIT 20`),
			"%s's reconcile runs of one job at once", svc)
	}
	var gate int
	require.NoError(t, dbs["stock"].QueryRow(context.Background(), `SELECT count(*) FROM reconcile_run WHERE job = 'gate'`).Scan(&gate))
	assert.Positive(t, gate, "both stock replicas schedule the gate job every 500 ms")
}

// placeOnBoth sends one order under one Idempotency-Key ("both-replicas") to each order
// replica, four times each, all at once: every answer names the same order (the key is unique
// in the database, whichever replica's combined batch gets there first).
func placeOnBoth(t *testing.T, ops *flashsale.Client, signer *auth.Signer, rs *launcher.System) {
	ctx := context.Background()
	sku := "BOTH-" + randomHex(3)
	require.NoError(t, ops.CreateSKU(ctx, sku, 5))
	require.NoError(t, ops.SetPrice(ctx, sku, 4900, "CNY", time.Minute))
	tok, err := signer.Mint("u-both", []auth.Role{auth.Buyer}, "u-both", time.Hour)
	require.NoError(t, err)
	body := map[string]any{"buyer_id": "u-both", "items": []map[string]any{{"sku": sku, "qty": 1}}, "currency": "CNY"}
	headers := map[string]string{"Authorization": "Bearer " + tok, "Idempotency-Key": "both-replicas"}
	var mu sync.Mutex
	ids := map[string]int{}
	var wg sync.WaitGroup
	for _, name := range rs.Replicas("order") {
		for range 4 {
			wg.Go(func() {
				var o flashsale.OrderView
				_, err := ops.Do(ctx, "place on "+name, "POST", rs.ProcessURL(name)+"/v1/orders", body, headers, &o)
				assert.NoError(t, err, name)
				mu.Lock()
				ids[o.OrderID]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	assert.Len(t, ids, 1, "one order id in every answer: %v", ids)
}
