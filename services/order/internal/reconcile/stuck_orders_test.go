package reconcile_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	pkgreconcile "github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/config"
	"github.com/stockflow/stockflow/services/order/internal/order"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
	"github.com/stockflow/stockflow/services/order/internal/reconcile"
)

// newOrders is the order service's use cases on a real database, CUP-1 priced, with a
// payment window of a second.
func newOrders(t *testing.T) (*app.Service, *pgxpool.Pool) {
	t.Helper()
	pool, _ := pgtest.New(t, postgres.Schemas()...)
	store := postgres.New(pool)
	svc := app.New(store, store, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Policy{PaymentWindow: time.Second})
	_, err := svc.SetPrice(context.Background(), "CUP-1", 100, "CNY", 0, "test")
	require.NoError(t, err)
	return svc, pool
}

// Each thing stock may have recorded about a stuck order leads to its transition. Stock's read
// API is played by a server answering what a real stock would for each case (test/e2e runs
// the real one, for the released case); the order database is real.
func TestStuckOrdersFollowWhatStockRecorded(t *testing.T) {
	ctx := context.Background()
	svc, pool := newOrders(t)
	place := func(key string) string {
		o, _, err := svc.PlaceOrder(ctx, app.PlaceOrderRequest{IdempotencyKey: key, BuyerID: "u1", Currency: "CNY",
			PaymentTimeout: time.Second, Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 1}}})
		require.NoError(t, err)
		return o.ID()
	}
	awaiting := func(key string) string {
		id := place(key)
		_, err := svc.Reconcile(ctx, id, "test", func(o *order.Order, at time.Time) (bool, error) { return o.StockLocked(at) })
		require.NoError(t, err)
		return id
	}
	cancelling := func(key string) string {
		id := awaiting(key)
		_, err := svc.CancelOrder(ctx, id, "changed my mind")
		require.NoError(t, err)
		return id
	}
	cases := map[string]struct{ id, stock, status string }{
		"unknown":  {place("k1"), "", "pending"},
		"rejected": {place("k2"), `{"outcome":"rejected","reject_reason":"insufficient_stock","reject_sku":"CUP-1","locks":[]}`, "rejected"},
		"locked":   {place("k3"), `{"outcome":"locked","locks":[{"state":"locked"}]}`, "awaiting_payment"},
		"sold":     {awaiting("k4"), `{"outcome":"locked","locks":[{"state":"sold"}]}`, "paid"},
		"released": {awaiting("k5"), `{"outcome":"locked","locks":[{"state":"released"}]}`, "closed"},
		"held":     {awaiting("k6"), `{"outcome":"locked","locks":[{"state":"locked"}]}`, "awaiting_payment"},
		// The buyer asked to cancel, but the deadline reached the locks first (found by a
		// chaos run: such orders ended cancelled over a release_timeout ledger row).
		"cancel lost to the deadline": {cancelling("k7"), `{"outcome":"locked","locks":[{"state":"released"}],"released_by":"timeout"}`, "closed"},
		"cancel won":                  {cancelling("k8"), `{"outcome":"locked","locks":[{"state":"released"}],"released_by":"cancel"}`, "cancelled"},
	}
	byID := map[string]string{}
	for _, c := range cases {
		byID[c.id] = c.stock
	}
	stock := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := byID[strings.TrimPrefix(r.URL.Path, "/v1/internal/orders/")]
		if body == "" {
			http.Error(w, `{"error":{"code":"order_not_found"}}`, http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(stock.Close)
	time.Sleep(1100 * time.Millisecond) // every deadline passes
	job := reconcile.StuckOrders(svc, stock.Client(), config.Config{StockURL: stock.URL, ReconcileBatch: 100})
	r, err := pkgreconcile.NewRunner(pool, nil, job)
	require.NoError(t, err)

	check, err := r.Run(ctx, "stuck_orders", pkgreconcile.Check, "test")
	require.NoError(t, err)
	assert.Equal(t, 8, check.Found)
	repair, err := r.Run(ctx, "stuck_orders", pkgreconcile.Repair, "test")
	require.NoError(t, err)
	assert.Equal(t, 7, repair.Repaired, "all but the lock stock still holds: %+v", repair.Findings)
	for name, c := range cases {
		o, err := svc.Get(ctx, c.id)
		require.NoError(t, err)
		assert.Equal(t, c.status, o.Status().String(), name)
	}
	var republished int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE subject LIKE 'order.created.%' AND convert_from(data, 'UTF8') LIKE '%' || $1 || '%'`,
		cases["unknown"].id).Scan(&republished))
	assert.Equal(t, 2, republished, "the order.created stock never saw, under a new id")

	again, err := r.Run(ctx, "stuck_orders", pkgreconcile.Check, "test")
	require.NoError(t, err)
	assert.Len(t, again.Findings, 3, "the re-published order waits for stock, the two held locks for stock's sweep")

	// The copy gets the grace the first order.created got: within it, no second copy; after
	// it, a second, numbered in the history (a chaos run with stock and PostgreSQL down
	// longer than the grace found two identical entries).
	sent, err := svc.RepublishCreated(ctx, cases["unknown"].id, time.Hour)
	require.NoError(t, err)
	assert.False(t, sent, "re-published a moment ago, within an hour's wait")
	repair, err = r.Run(ctx, "stuck_orders", pkgreconcile.Repair, "test")
	require.NoError(t, err)
	assert.Equal(t, 1, repair.Repaired, "a grace of 0: the unknown order is sent again %+v", repair.Findings)
	o, err := svc.Get(ctx, cases["unknown"].id)
	require.NoError(t, err)
	var notes []string
	for _, h := range o.History() {
		if strings.Contains(h.Reason, "re-published") {
			notes = append(notes, h.Reason)
		}
	}
	assert.Equal(t, []string{
		"order.created re-published by reconciliation (1): stock had no record of the order",
		"order.created re-published by reconciliation (2): stock had no record of the order",
	}, notes)
}

// Only stock's own 404 order_not_found means stock never saw the order: a 404 from a wrong
// STOCK_URL (route_not_found) is a failure to ask, and re-publishes nothing.
func TestStuckOrdersTakeOnlyStocksOwnNotFound(t *testing.T) {
	ctx := context.Background()
	svc, pool := newOrders(t)
	o, _, err := svc.PlaceOrder(ctx, app.PlaceOrderRequest{IdempotencyKey: "k1", BuyerID: "u1", Currency: "CNY",
		PaymentTimeout: time.Second, Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 1}}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	httpx.NotFound(mux)
	stock := httptest.NewServer(mux)
	t.Cleanup(stock.Close)
	time.Sleep(1100 * time.Millisecond) // the deadline passes
	r, err := pkgreconcile.NewRunner(pool, nil, reconcile.StuckOrders(svc, stock.Client(), config.Config{StockURL: stock.URL, ReconcileBatch: 100}))
	require.NoError(t, err)

	repair, err := r.Run(ctx, "stuck_orders", pkgreconcile.Repair, "test")
	require.NoError(t, err)
	assert.Zero(t, repair.Repaired)
	require.Len(t, repair.Findings, 1)
	assert.Contains(t, repair.Findings[0].Error, "could not ask stock: status 404 route_not_found")
	var created int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE subject LIKE 'order.created.%' AND convert_from(data, 'UTF8') LIKE '%' || $1 || '%'`,
		o.ID()).Scan(&created))
	assert.Equal(t, 1, created, "the first order.created only")
}
