package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
)

// BenchmarkPlaceOrder is POST /v1/orders without HTTP: PlaceOrder from 64 goroutines on one
// hot SKU, combined as the service runs it (ORDER_COMBINE_MAX_BATCH 128), each order with its
// own buyer and key, under the default per-buyer limit. "cached" prices the orders as the
// service does (ORDER_PRICE_CACHE_TTL 2s); "uncached" reads the price for every order.
func BenchmarkPlaceOrder(b *testing.B) {
	for _, bc := range []struct {
		name  string
		ttl   time.Duration
		buyer app.RateLimit
	}{
		{"cached", 2 * time.Second, app.RateLimit{Rate: 5, Burst: 10}},
		{"uncached", 0, app.RateLimit{Rate: 5, Burst: 10}},
		{"cached-nolimit", 2 * time.Second, app.RateLimit{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pool, _ := pgtest.New(b, postgres.Schemas()...)
			store := postgres.New(pool)
			repo := app.Combine(store, combine.Options{MaxBatch: 128})
			b.Cleanup(repo.Close)
			svc := app.New(repo, store, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Policy{
				PaymentWindow: 30 * time.Minute, MinPaymentWindow: time.Minute, PriceCacheTTL: bc.ttl,
				PerBuyer: bc.buyer,
			})
			ctx := context.Background()
			_, err := svc.SetPrice(ctx, "CUP-1", 4900, "CNY", 0, "bench")
			require.NoError(b, err)
			var seq atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					_, _, err := svc.PlaceOrder(ctx, app.PlaceOrderRequest{
						IdempotencyKey: fmt.Sprintf("k-%d", i), BuyerID: fmt.Sprintf("u%d", i),
						Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 1}},
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
		})
	}
}
