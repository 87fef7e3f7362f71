package e2e

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape reads a service's GET /metrics, which Prometheus reads without a token.
func scrape(t *testing.T, svc string) string { return scrapeURL(t, svc, sys.URLs[svc]) }

// scrapeURL reads GET base/metrics of the process who.
func scrapeURL(t *testing.T, who, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err, who)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, who)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s /metrics: %s", who, body)
	return string(body)
}

// TestMetricsOfAPaidOrder runs one order to paid on the four processes and reads their
// /metrics as Prometheus would: each metric of docs/observability.md that such an order must
// move is there, under the name the catalogue gives (the alerts and the dashboard use those).
func TestMetricsOfAPaidOrder(t *testing.T) {
	c := client{t}
	sku := "MET-" + randomHex(3)
	c.createSKU(sku, 5)
	id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 4900})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	status, body := c.pay(id, 4900, "txn-"+id)
	require.Equal(t, http.StatusOK, status, "%v", body)
	c.waitStatus(id, "paid", 10*time.Second)

	want := map[string][]string{
		"order": {
			`http_server_request_duration_seconds_count\{[^}]*http_route="/v1/orders"`,
			`stockflow_order_transitions_total\{[^}]*status="paid"`,
			`stockflow_order_refund_pending_oldest_age_seconds`,
			`stockflow_combine_batch_size_count\{[^}]*batcher="`,
			`stockflow_outbox_backlog`, `stockflow_outbox_oldest_age_seconds`,
			`stockflow_messaging_consumer_lag\{[^}]*consumer="order-stock-outcomes"`,
		},
		"stock": {
			`stockflow_stock_lock_outcomes_total\{[^}]*outcome="locked"`,
			`stockflow_stock_lock_duration_seconds_count`,
			`stockflow_stock_resolve_outcomes_total\{[^}]*outcome="applied"[^}]*step="sell"|stockflow_stock_resolve_outcomes_total\{[^}]*step="sell"[^}]*outcome="applied"`,
			`stockflow_combine_batch_size_count\{[^}]*batcher="lock"`,
			`stockflow_combine_flush_duration_seconds_count\{[^}]*batcher="lock"`,
			`stockflow_stock_oversell_total`,
			`stockflow_stock_overdue_locks`,
			`stockflow_messaging_consumer_lag\{[^}]*consumer="stock-order-created"`,
		},
		"payment-adapter": {
			`stockflow_payment_callbacks_total\{[^}]*verdict="accepted"`,
			`http_server_request_duration_seconds_count\{[^}]*http_route="/v1/callbacks/\{provider\}"`,
		},
		"timeout": {
			`stockflow_messaging_consumer_lag\{[^}]*consumer="timeout-stock-locked"`,
		},
	}
	for svc, patterns := range want {
		text := scrape(t, svc)
		for _, p := range patterns {
			if !regexp.MustCompile(`(?m)^(` + p + `)`).MatchString(text) {
				t.Errorf("%s /metrics has no %s; its series:\n%s", svc, p, seriesNames(text))
			}
		}
	}
	oversold := regexp.MustCompile(`(?m)^stockflow_stock_oversell_total(\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(scrape(t, "stock"), -1)
	require.NotEmpty(t, oversold)
	for _, m := range oversold {
		assert.Equal(t, "0", m[2], "oversell %s", m[1])
	}
}

// seriesNames is each series of a scrape once, without its labels.
func seriesNames(text string) string {
	var names []string
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), " ")
}
