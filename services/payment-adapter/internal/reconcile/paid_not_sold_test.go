package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
	paymentreconcile "github.com/stockflow/stockflow/services/payment-adapter/internal/reconcile"
)

// A succeeded payment is re-driven when stock says it never saw the order (404
// order_not_found); a 404 from a wrong STOCK_URL (route_not_found, a proxy's page) is a
// failure to ask, and re-drives nothing.
func TestPaidNotSoldTakesOnlyStocksOwnNotFound(t *testing.T) {
	stockNotFound := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteError(w, httpx.Errorf(http.StatusNotFound, events.OrderNotFound, "stock has no record of the order"))
	})
	routeNotFound := http.NewServeMux()
	httpx.NotFound(routeNotFound)
	for _, c := range []struct {
		name      string
		stock     http.Handler
		kind      string
		succeeded int // payment.succeeded in the outbox after the run: 2 when re-driven
	}{
		{"stock never saw the order", stockNotFound, "paid_not_sold/repaired", 2},
		{"a wrong base path (route_not_found)", routeNotFound, "paid_not_sold_unknown", 1},
		{"a proxy's plain 404", http.NotFoundHandler(), "paid_not_sold_unknown", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			e.order("ord-1", 9800)
			sb, err := sandbox.New("jobs-test")
			require.NoError(t, err)
			body := []byte(`{"provider_txn_id":"txn-1","order_id":"ord-1","amount":9800,"currency":"USD","status":"succeeded"}`)
			h := http.Header{}
			h.Set(sandbox.SignatureHeader, sb.Sign(body))
			_, err = e.svc.HandleCallback(context.Background(), sandbox.Name, h, body)
			require.NoError(t, err)
			succeeded := func() int {
				return len(slices.DeleteFunc(e.subjects(), func(s string) bool { return s != events.SubjectPaymentSucceeded }))
			}
			require.Equal(t, 1, succeeded())

			stock := httptest.NewServer(c.stock)
			t.Cleanup(stock.Close)
			cfg := e.cfg
			cfg.StockURL, cfg.PaidNotSoldLookback = stock.URL, time.Hour
			res := e.run(paymentreconcile.PaidNotSold(e.svc, stock.Client(), cfg), reconcile.Repair)
			assert.Equal(t, map[string]int{c.kind: 1}, kinds(res), "%+v", res.Findings)
			if c.kind == "paid_not_sold_unknown" {
				assert.Contains(t, res.Findings[0].Error, fmt.Sprintf("status %d", http.StatusNotFound))
			}
			assert.Equal(t, c.succeeded, succeeded(), "payment.succeeded in the outbox")
		})
	}
}
