// Package e2e runs the four services as separate processes against a real PostgreSQL and the
// pinned NATS server — started by the same launcher as `make up` — and drives them through
// their public HTTP APIs only.
package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/freeport"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/tools/launcher"
)

const sandboxSecret = "e2e-sandbox-secret"

var sys *launcher.System

// dbPrefix starts the names of this run's databases (e2e_<random>_order, …).
var dbPrefix = "e2e_" + randomHex(4) + "_"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	runDir, err := os.MkdirTemp("", "stockflow-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	prefix := dbPrefix
	traces = newTraceReceiver() // every service exports its spans here (trace_test.go)
	defer traces.Close()
	opts := launcher.Options{
		Root: root, RunDir: runDir, DatabaseURL: pgtest.ServerURL(),
		Ports:     map[string]int{"order": 0, "stock": 0, "payment-adapter": 0, "timeout": 0},
		DBPrefix:  prefix,
		RedisPort: freePort(), PaysimPort: freePort(),
		Console: true, ConsolePort: -1, // the operations console, driven by chromium (console_test.go)
		Env: []string{
			"RECONCILE_GATE_INTERVAL=500ms", // the gate job re-arms within a second (gate_test.go)
			"PAYMENT_SANDBOX_SECRET=" + sandboxSecret,
			"TIMEOUT_SWEEP_INTERVAL=500ms",
			"CONSUMER_ACK_WAIT=3s", // a SIGKILLed consumer's deliveries come back in 3 s, not 30
			"LOG_LEVEL=DEBUG",
			"ORDER_MIN_PAYMENT_WINDOW=1s", // deadlines of 1-2 s make timeouts testable
			// The cross-service reconcile jobs run when a test triggers them, on whatever is
			// old enough at once (reconcile_test.go).
			"RECONCILE_PAID_NOT_SOLD_INTERVAL=0", "RECONCILE_PAID_NOT_SOLD_AGE=0s",
			"RECONCILE_ORPHAN_LOCKS_INTERVAL=0", "RECONCILE_ORPHAN_LOCKS_AGE=0s",
			"RECONCILE_STUCK_ORDERS_INTERVAL=0", "RECONCILE_STUCK_ORDERS_GRACE=0s",
			"RECONCILE_LOST_CALLBACKS_INTERVAL=0", "RECONCILE_LOST_CALLBACKS_AGE=0s",
			"RECONCILE_REFUNDS_INTERVAL=0", "RECONCILE_REFUNDS_AGE=0s",
			"RECONCILE_BATCH=10000",
			// Spans go to the in-test OTLP receiver, every one, within 100 ms of ending.
			// Traces only: the metrics keep to /metrics, as without an endpoint.
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + traces.URL + "/v1/traces",
			"OTEL_TRACES_SAMPLER=always_on", "OTEL_BSP_SCHEDULE_DELAY=100",
		},
		Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "e2e: "+f+"\n", a...) },
	}
	sys, err = launcher.Up(ctx, opts)
	defer func() {
		if sys != nil {
			if err := sys.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: stop:", err)
			}
		}
		dropDatabases(prefix)
		if os.Getenv("E2E_KEEP") == "" {
			_ = os.RemoveAll(runDir)
		} else {
			fmt.Fprintln(os.Stderr, "e2e: logs kept in", runDir)
		}
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: up:", err)
		dumpLogs(runDir)
		return 1
	}
	code := m.Run()
	if code != 0 {
		dumpLogs(runDir)
	}
	return code
}

func dumpLogs(runDir string) {
	files, _ := filepath.Glob(filepath.Join(runDir, "logs", "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(os.Stderr, "--- %s (tail)\n%s\n", filepath.Base(f), strings.Join(lines, "\n"))
	}
}

func dropDatabases(prefix string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE $1`, prefix+"%")
	if err != nil {
		return
	}
	names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	for _, n := range names {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)")
	}
}

// freePort is a TCP port nothing listens on now, never one handed out before in this run
// (freeport.Port: two quick picks may otherwise get the same port).
func freePort() int {
	p, err := freeport.Port()
	if err != nil {
		panic(err)
	}
	return p
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// --- a small client of the public APIs ---

// The staff identity of the tests' calls (a header of the caller's own wins), and the tokens
// the local identity provider signed, by subject and roles.
var (
	staffSubject = "e2e-staff"
	staffRoles   = []auth.Role{auth.Viewer, auth.Operator, auth.Admin}
	tokens       sync.Map
)

func token(t testing.TB, subject string, roles ...auth.Role) string {
	key := fmt.Sprint(subject, roles)
	if tok, ok := tokens.Load(key); ok {
		return tok.(string)
	}
	tok, err := sys.Token(subject, roles...)
	require.NoError(t, err)
	tokens.Store(key, tok)
	return tok
}

type client struct{ t testing.TB }

func (c client) call(method, url string, body any, headers map[string]string) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(c.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(c.t, err)
	switch {
	case strings.Contains(url, "/v1/internal/"): // the routes between services: as the order service calls them
		tok, err := sys.ServiceToken("order")
		require.NoError(c.t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
	case !strings.Contains(url, "/v1/callbacks/"):
		req.Header.Set("Authorization", "Bearer "+token(c.t, staffSubject, staffRoles...))
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	var out map[string]any
	if len(raw) > 0 {
		require.NoError(c.t, json.Unmarshal(raw, &out), "%s %s: %s", method, url, raw)
	}
	return resp.StatusCode, out
}

// createSKU creates sku in stock with onHand units and puts it on sale at 49.00 CNY, with the
// order service's default payment window.
func (c client) createSKU(sku string, onHand int64) {
	c.t.Helper()
	status, body := c.call("POST", sys.URLs["stock"]+"/v1/skus", map[string]any{"sku": sku, "on_hand": onHand}, nil)
	require.Equal(c.t, http.StatusCreated, status, "%v", body)
	c.setPrice(sku, 4900, "")
}

// setPrice sets sku's price (minor units of CNY) and payment window ("": the default) on the
// order service, as an operator.
func (c client) setPrice(sku string, unitPrice int64, window string) {
	c.t.Helper()
	body := map[string]any{"unit_price": unitPrice, "currency": "CNY"}
	if window != "" {
		body["payment_window"] = window
	}
	status, resp := c.call("PUT", sys.URLs["order"]+"/v1/prices/"+sku, body, nil)
	require.Equal(c.t, http.StatusOK, status, "%v", resp)
	priced.Store(fmt.Sprint(sku, "=", unitPrice), true)
}

// priced remembers the prices setPrice set ("sku=price").
var priced sync.Map

func (c client) sku(sku string) map[string]any {
	c.t.Helper()
	status, body := c.call("GET", sys.URLs["stock"]+"/v1/skus/"+sku, nil, nil)
	require.Equal(c.t, http.StatusOK, status, "%v", body)
	return body
}

// item is an order line; UnitPrice, when set, is quoted in the request.
type item struct {
	SKU       string `json:"sku"`
	Qty       int64  `json:"qty"`
	UnitPrice int64  `json:"unit_price,omitempty"`
}

// order places an order of items with payment_timeout timeout ("": the SKUs' window) as a new
// buyer and returns its id. A line quoting a unit price first sets the SKU's price to it,
// once, as an operator would before the sale: the tests say what the SKU sells at.
func (c client) order(timeout string, items ...item) string {
	c.t.Helper()
	for _, it := range items {
		if _, ok := priced.Load(fmt.Sprint(it.SKU, "=", it.UnitPrice)); it.UnitPrice != 0 && !ok {
			c.setPrice(it.SKU, it.UnitPrice, "")
		}
	}
	body := map[string]any{"items": items, "currency": "CNY"}
	if timeout != "" {
		body["payment_timeout"] = timeout
	}
	status, resp := c.place("u-"+randomHex(3), body)
	require.Equal(c.t, http.StatusCreated, status, "%v", resp)
	return resp["order_id"].(string)
}

// place posts body as buyer's order, under a new idempotency key.
func (c client) place(buyer string, body map[string]any) (int, map[string]any) {
	c.t.Helper()
	body["buyer_id"] = buyer
	return c.call("POST", sys.URLs["order"]+"/v1/orders", body,
		map[string]string{"Idempotency-Key": randomHex(8), "Authorization": "Bearer " + token(c.t, buyer, auth.Buyer)})
}

func (c client) getOrder(id string) map[string]any {
	c.t.Helper()
	status, body := c.call("GET", sys.URLs["order"]+"/v1/orders/"+id, nil, nil)
	require.Equal(c.t, http.StatusOK, status, "%v", body)
	return body
}

// waitStatus polls the order until it has status want.
func (c client) waitStatus(id, want string, within time.Duration) map[string]any {
	c.t.Helper()
	var last map[string]any
	require.Eventually(c.t, func() bool {
		last = c.getOrder(id)
		return last["status"] == want
	}, within, 20*time.Millisecond, "order %s never reached %s", id, want)
	return last
}

func sign(body []byte) string {
	m := hmac.New(sha256.New, []byte(sandboxSecret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// pay posts a sandbox provider callback for the order.
func (c client) pay(orderID string, amount int64, txn string) (int, map[string]any) {
	c.t.Helper()
	return c.notify(orderID, amount, txn, "succeeded")
}

// notify posts the sandbox provider's signed notification that transaction txn of orderID
// has status (succeeded, failed).
func (c client) notify(orderID string, amount int64, txn, status string) (int, map[string]any) {
	c.t.Helper()
	raw, err := json.Marshal(map[string]any{"provider_txn_id": txn, "order_id": orderID, "amount": amount, "currency": "CNY", "status": status})
	require.NoError(c.t, err)
	return c.call("POST", sys.URLs["payment-adapter"]+"/v1/callbacks/sandbox", raw, map[string]string{"X-Sandbox-Signature": sign(raw), "Content-Type": "application/json"})
}

// requireConsistent is the check after every end-to-end test: the stock service's verify
// finds no difference (ledger fold = summary, lock rows = locked/sold), and no lock is held
// past its deadline.
func (c client) requireConsistent() {
	c.t.Helper()
	status, body := c.call("POST", sys.URLs["stock"]+"/v1/admin/verify", nil, nil)
	require.Equal(c.t, http.StatusOK, status)
	require.Equal(c.t, true, body["consistent"], "verify: %v", body["differences"])
	require.Eventually(c.t, func() bool {
		status, body := c.call("GET", sys.URLs["stock"]+"/v1/admin/overdue-locks?grace=2s", nil, nil)
		require.Equal(c.t, http.StatusOK, status, "%v", body)
		return body["count"] == float64(0)
	}, 10*time.Second, 100*time.Millisecond, "locks held past their deadline")
}
