package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/order"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
)

// orderMetrics reads the order service's metrics from r: the transitions by status, and the
// refund_pending age (ok=false when it was not reported).
func orderMetrics(t *testing.T, r sdkmetric.Reader) (transitions map[string]int64, age float64, ok bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	transitions = map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					transitions[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
				}
			case metricdata.Gauge[float64]:
				require.Len(t, d.DataPoints, 1, m.Name)
				age, ok = d.DataPoints[0].Value, m.Name == "stockflow.order.refund_pending.oldest_age"
			}
		}
	}
	return transitions, age, ok
}

// The funnel counts each order entering a status once, after the commit, with the writes
// combined (creations and outcomes in batches): never for a replayed request, a duplicate
// message or an outcome that changes nothing. The refund_pending gauge is the age of the order
// waiting there.
func TestMetricsCountTheFunnel(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(ctx)) })
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }

	pool, _ := pgtest.New(t, postgres.Schemas()...)
	store := postgres.New(pool)
	repo := app.Combine(store, combine.Options{MaxBatch: 64})
	t.Cleanup(repo.Close)
	svc := app.New(repo, store, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Policy{PaymentWindow: time.Minute},
		app.WithClock(now), app.WithMeterProvider(mp))
	_, err := svc.SetPrice(ctx, "CUP-1", 100, "CNY", 0, "test")
	require.NoError(t, err)

	ids := make([]string, 3)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			o, created := place(t, svc, fmt.Sprintf("k-%d", i), 0)
			assert.True(t, created)
			ids[i] = o.ID()
		})
	}
	wg.Wait()
	_, created := place(t, svc, "k-0", 0)
	require.False(t, created, "a replayed request")

	follow := func(id, msg string, apply app.Apply) app.Result {
		t.Helper()
		res, err := svc.Follow(ctx, inbox.Message{Consumer: "c", ID: msg}, id, "test", apply)
		require.NoError(t, err)
		return res
	}
	locked := func(o *order.Order, at time.Time) (bool, error) { return o.StockLocked(at) }
	for _, id := range []string{ids[0], ids[2]} {
		wg.Go(func() { assert.Equal(t, app.Applied, follow(id, "locked-"+id, locked)) })
	}
	wg.Go(func() {
		assert.Equal(t, app.Applied, follow(ids[1], "rejected", func(o *order.Order, at time.Time) (bool, error) {
			return o.StockLockRejected(at, "insufficient_stock")
		}))
	})
	wg.Wait()
	require.Equal(t, app.Duplicate, follow(ids[0], "locked-"+ids[0], locked))
	require.Equal(t, app.Unchanged, follow(ids[0], "locked-again", locked))
	require.Equal(t, app.Applied, follow(ids[0], "sold", func(o *order.Order, at time.Time) (bool, error) { return o.StockSold(at, false) }))
	_, err = svc.RefundOrder(ctx, ids[0], "buyer")
	require.NoError(t, err)
	_, err = svc.CancelOrder(ctx, ids[2], "buyer")
	require.NoError(t, err)
	require.Equal(t, app.Applied, follow(ids[2], "released", func(o *order.Order, at time.Time) (bool, error) {
		return o.StockReleased(at, order.ReleaseCancel)
	}))

	clock.Add(int64(90 * time.Second))
	transitions, age, ok := orderMetrics(t, reader)
	assert.Equal(t, map[string]int64{
		"status=pending": 3, "status=awaiting_payment": 2, "status=rejected": 1,
		"status=paid": 1, "status=refund_pending": 1, "status=cancelled": 1,
	}, transitions, "a cancel request keeps the status: the release moves it")
	require.True(t, ok, "the refund_pending gauge is reported")
	assert.Equal(t, 90.0, age, "the refund was requested 90 s ago")
}
