package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/tools/flashsale"
)

// TestFlashSaleSmallScale runs the demo's flash sale at small scale — 1,000 buyers for 200
// units, 2s payment deadlines, returning buyers — and checks that every invariant held and
// that the simulator's counters are what the APIs say.
func TestFlashSaleSmallScale(t *testing.T) {
	c := client{t}
	cfg := saleConfig(t)
	cfg.Units, cfg.Buyers, cfg.Concurrency = 200, 1000, 32
	cfg.PaymentTimeout = 2 * time.Second
	cfg.ArrivalWindow = 6 * time.Second
	cfg.RetryDelay = time.Second
	cfg.RetryRatio = 0.5
	cfg.SettleTimeout = 20 * time.Second
	cfg.ChartPath = filepath.Join(t.TempDir(), "flashsale.png")
	cfg.GateLead = time.Second // armed before the sale, as the demo does

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := flashsale.Run(ctx, cfg, nil)
	require.NotNil(t, rep, "%v", err)
	t.Logf("\n%s", rep)
	require.NoError(t, err)
	for _, ch := range rep.Checks {
		assert.True(t, ch.Pass, "%s: %s", ch.Name, ch.Detail)
	}

	assert.Equal(t, "armed", rep.Gate, "the e2e system has Redis")
	t.Logf("the gate turned away %d attempts", rep.TurnedAway)

	// The shape of the sale: payments, timeouts, returning buyers. (Whether buyers are turned
	// away depends on how fast this machine locks: a 2s deadline returns stock quickly.)
	assert.Positive(t, rep.ByStatus["paid"], "%v", rep.ByStatus)
	assert.Positive(t, rep.LedgerRows["release_timeout"], "%v", rep.LedgerRows)
	assert.Positive(t, rep.Retries)

	// The report's counters against the APIs, read here independently.
	sku := c.sku(rep.SKU)
	assert.Equal(t, [4]float64{200, float64(rep.Final.Available), 0, float64(rep.Final.Sold)},
		[4]float64{sku["on_hand"].(float64), sku["available"].(float64), sku["locked"].(float64), sku["sold"].(float64)})

	byStatus := map[string]int{}
	awaited, paidUnits := 0, int64(0)
	for _, o := range rep.Outcomes {
		got := c.getOrder(o.OrderID)
		status := got["status"].(string)
		byStatus[status]++
		assert.Equal(t, o.Status, status, "order %s", o.OrderID)
		for _, h := range got["history"].([]any) {
			if h.(map[string]any)["status"] == "awaiting_payment" {
				awaited++
				break
			}
		}
		if status == "paid" {
			paidUnits += o.Qty
		}
	}
	assert.Len(t, rep.Outcomes, rep.Orders)
	assert.Equal(t, rep.ByStatus, byStatus, "orders by status")
	assert.Equal(t, rep.Orders, statusTotal(byStatus), "orders by status summed = orders created")

	rows := ledgerRowCounts(c, rep.SKU)
	assert.Equal(t, rep.LedgerRows, rows, "ledger rows by change type")
	assert.Equal(t, awaited, rows["lock"], "lock rows = orders that reached awaiting_payment")
	assert.Equal(t, byStatus["paid"], rows["sell"], "sell rows = paid orders")
	assert.Equal(t, float64(paidUnits), sku["sold"].(float64), "final sold = paid units")
	assert.LessOrEqual(t, paidUnits, int64(200))
	c.requireConsistent()
}

// saleConfig is the flash sale's defaults pointed at this run's system, its tokens signed by
// the system's identity provider.
func saleConfig(t *testing.T) flashsale.Config {
	t.Helper()
	cfg := flashsale.Default()
	cfg.OrderURL, cfg.StockURL, cfg.PaymentURL = sys.URLs["order"], sys.URLs["stock"], sys.URLs["payment-adapter"]
	cfg.SandboxSecret = sandboxSecret
	signer, err := sys.Signer()
	require.NoError(t, err)
	cfg.Signer = signer
	return cfg
}

func statusTotal(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// ledgerRowCounts pages through the SKU's ledger and counts rows by change type.
func ledgerRowCounts(c client, sku string) map[string]int {
	c.t.Helper()
	rows := map[string]int{}
	after := 0.0
	for {
		status, body := c.call("GET", fmt.Sprintf("%s/v1/skus/%s/ledger?after=%.0f&limit=500", sys.URLs["stock"], sku, after), nil, nil)
		require.Equal(c.t, http.StatusOK, status, "%v", body)
		for _, e := range body["entries"].([]any) {
			rows[e.(map[string]any)["change_type"].(string)]++
		}
		next, ok := body["next_after"].(float64)
		if !ok || next == 0 {
			return rows
		}
		after = next
	}
}
