package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
)

// The read model answers from its snapshot, and only a refresh changes it: a sale is not seen
// until the next refresh; a failed refresh keeps the last snapshot with its true as_of and is
// counted; a model that never loaded answers ErrAvailabilityNotReady instead of waiting again.
func TestAvailabilityAnswersFromItsSnapshot(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.New(t, service.Schemas(postgres.Schema)...)
	svc := app.New(postgres.NewStore(pool))
	t.Cleanup(svc.Close)
	for sku, n := range map[string]int64{"CUP-1": 300, "MUG-1": 5, "GONE-1": 0} {
		_, err := svc.CreateSKU(ctx, sku, n, "test")
		require.NoError(t, err)
	}
	_, _, err := svc.SetSlots(ctx, "CUP-1", 4, "test")
	require.NoError(t, err)

	// The read model has a pool of its own, closed below to make its refreshes fail.
	readPool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(readPool.Close)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(context.Background())) })
	opts := app.AvailabilityOptions{TTL: time.Minute, Low: 10, Meters: mp}
	avail := app.NewAvailability(postgres.NewStore(readPool), opts)

	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, err = avail.Get(gone, []string{"CUP-1"})
	require.ErrorIs(t, err, app.ErrAvailabilityNotReady, "a request that gives up before the first refresh")

	before := time.Now()
	require.NoError(t, avail.Refresh(ctx))
	first, err := avail.Get(ctx, []string{"CUP-1", "NOPE-1", "MUG-1", "GONE-1"})
	require.NoError(t, err)
	assert.Equal(t, []app.SKUAvailability{{SKU: "CUP-1", Available: 300, Status: app.InStock},
		{SKU: "MUG-1", Available: 5, Status: app.LowStock}, {SKU: "GONE-1", Available: 0, Status: app.SoldOut}}, first.SKUs,
		"in the order asked; CUP-1's four slots summed")
	assert.Equal(t, []string{"NOPE-1"}, first.Unknown)
	assert.False(t, first.AsOf.Before(before))
	assert.LessOrEqual(t, first.MaxAge, opts.TTL)

	res, err := svc.LockForOrder(ctx, nil, "o-1", []events.Line{line("CUP-1", 2)}, time.Now().Add(time.Hour), "test")
	require.NoError(t, err)
	require.True(t, res.Locked)
	_, err = svc.SellLocked(ctx, nil, "o-1", "pay-1", "test")
	require.NoError(t, err)
	sold := time.Now()

	cached, err := avail.Get(ctx, []string{"CUP-1"})
	require.NoError(t, err)
	assert.Equal(t, int64(300), cached.SKUs[0].Available, "no refresh yet: the snapshot's figure")
	assert.Equal(t, first.AsOf, cached.AsOf)

	require.NoError(t, avail.Refresh(ctx))
	fresh, err := avail.Get(ctx, []string{"CUP-1"})
	require.NoError(t, err)
	assert.Equal(t, int64(298), fresh.SKUs[0].Available)
	assert.True(t, fresh.AsOf.After(sold))

	readPool.Close()
	require.Error(t, avail.Refresh(ctx))
	stale, err := avail.Get(ctx, []string{"CUP-1"})
	require.NoError(t, err, "a failed refresh keeps serving")
	assert.Equal(t, fresh.AsOf, stale.AsOf, "with the snapshot's true as_of")
	assert.Equal(t, int64(298), stale.SKUs[0].Available)
	m := collect(t, reader)
	assert.Equal(t, map[string]float64{"outcome=ok": 2, "outcome=failed": 1}, m["stockflow.stock.availability.refreshes"])
	assert.Equal(t, float64(3), m["stockflow.stock.availability.refresh.duration"][""])

	never := app.NewAvailability(postgres.NewStore(readPool), opts)
	require.Error(t, never.Refresh(ctx))
	_, err = never.Get(ctx, []string{"CUP-1"})
	assert.ErrorIs(t, err, app.ErrAvailabilityNotReady, "the first refresh failed: answered at once")
}

// Run refreshes until its context ends, a request made before the first refresh waits for it,
// and the age gauge reports while Run runs.
func TestAvailabilityRunRefreshesInTheBackground(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	svc := app.New(postgres.NewStore(pool))
	t.Cleanup(svc.Close)
	_, err := svc.CreateSKU(ctx, "CUP-1", 3, "test")
	require.NoError(t, err)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(context.Background())) })
	avail := app.NewAvailability(postgres.NewStore(pool), app.AvailabilityOptions{TTL: 100 * time.Millisecond, Meters: mp})

	got := make(chan app.AvailabilityAnswer, 1)
	go func() {
		ans, err := avail.Get(ctx, []string{"CUP-1"})
		assert.NoError(t, err)
		got <- ans
	}()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- avail.Run(runCtx) }()
	ans := <-got
	require.Len(t, ans.SKUs, 1, "the waiting request is answered by the first refresh")
	assert.Equal(t, app.InStock, ans.SKUs[0].Status, "Low 0: no low status")

	_, err = svc.CreateSKU(ctx, "MUG-1", 1, "test")
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ans, err := avail.Get(ctx, []string{"MUG-1"})
		assert.NoError(c, err)
		assert.Empty(c, ans.Unknown, "a SKU created after a refresh appears with the next one")
	}, 10*time.Second, 20*time.Millisecond)
	assert.Contains(t, collect(t, reader), "stockflow.stock.availability.age")

	stop()
	require.NoError(t, <-done)
}
