package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
)

// TestPricesAreCachedForTheTTLOnOtherReplicas: two replicas on one database. The one that
// sets a price prices by it at once; the other within ORDER_PRICE_CACHE_TTL. A SKU put on
// sale is for sale at once on both: a missing price is never cached.
func TestPricesAreCachedForTheTTLOnOtherReplicas(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, postgres.Schemas()...)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	replica := func() *app.Service {
		store := postgres.New(pool)
		return app.New(store, store, slog.New(slog.NewTextHandler(io.Discard, nil)),
			app.Policy{PaymentWindow: time.Hour, PriceCacheTTL: 2 * time.Second}, app.WithClock(func() time.Time { return now }))
	}
	a, b := replica(), replica()
	n := 0
	total := func(svc *app.Service, sku string) (int64, error) {
		n++
		o, _, err := svc.PlaceOrder(ctx, app.PlaceOrderRequest{IdempotencyKey: fmt.Sprint("k", n), BuyerID: "u1",
			Items: []app.ItemRequest{{SKU: sku, Qty: 1}}})
		if err != nil {
			return 0, err
		}
		return o.Total().Int64(), nil
	}

	_, err := total(b, "CUP-1")
	require.ErrorIs(t, err, app.ErrNotForSale)
	_, err = a.SetPrice(ctx, "CUP-1", 100, "CNY", 0, "ops")
	require.NoError(t, err)
	got, err := total(b, "CUP-1")
	require.NoError(t, err, "on sale at once on the other replica too")
	assert.Equal(t, int64(100), got)

	_, err = a.SetPrice(ctx, "CUP-1", 200, "CNY", 0, "ops")
	require.NoError(t, err)
	got, err = total(a, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, int64(200), got, "the replica that set it prices by it at once")
	got, err = total(b, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, int64(100), got, "the other one within the TTL")
	now = now.Add(2 * time.Second)
	got, err = total(b, "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, int64(200), got, "and after it")
}
