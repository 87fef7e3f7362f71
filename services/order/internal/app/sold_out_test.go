package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/stockflow/stockflow/services/order/internal/app"
)

func cup(qty int64) []app.ItemRequest { return []app.ItemRequest{{SKU: "CUP-1", Qty: qty}} }

// TestSoldOutIsRemembered: after the gate answered sold_out, KnownSoldOut answers it from
// memory for that SKU and any quantity at least as large, counted as sold_out_cached; a
// smaller quantity, another SKU, or a service without WithSoldOutTTL is not answered.
func TestSoldOutIsRemembered(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(ctx)) })
	svc, _, _, rows := gated(t, 2, app.WithSoldOutTTL(time.Minute), app.WithMeterProvider(mp))
	assert.False(t, svc.MaybeSoldOut(), "nothing sold out yet")
	require.NoError(t, svc.KnownSoldOut(ctx, cup(1)))

	require.NoError(t, buy(svc, "k1", 1))
	require.ErrorIs(t, buy(svc, "k2", 2), app.ErrSoldOut, "one unit left, two asked")
	assert.True(t, svc.MaybeSoldOut())
	before := rows()
	err := svc.KnownSoldOut(ctx, []app.ItemRequest{{SKU: "MUG-2", Qty: 1}, {SKU: "CUP-1", Qty: 3}})
	require.ErrorIs(t, err, app.ErrSoldOut)
	assert.Contains(t, err.Error(), "CUP-1")
	assert.NoError(t, svc.KnownSoldOut(ctx, cup(1)), "one unit is left: a buyer of one asks the gate")
	assert.NoError(t, svc.KnownSoldOut(ctx, []app.ItemRequest{{SKU: "MUG-2", Qty: 5}}))
	assert.Equal(t, before, rows())

	counts, _, _ := orderMetrics(t, reader)
	assert.Equal(t, int64(1), counts["verdict=sold_out_cached"])
	assert.Equal(t, int64(1), counts["verdict=sold_out"])

	plain, _, _, _ := gated(t, 0)
	require.ErrorIs(t, buy(plain, "k1", 1), app.ErrSoldOut)
	assert.False(t, plain.MaybeSoldOut(), "without WithSoldOutTTL nothing is remembered")
	assert.NoError(t, plain.KnownSoldOut(ctx, cup(1)))
}

// TestRememberedSoldOutWhenRedisIsDown: a buyer of a SKU remembered sold out is turned away
// with no row even when Redis does not answer; another SKU takes the database path.
func TestRememberedSoldOutWhenRedisIsDown(t *testing.T) {
	svc, _, srv, rows := gated(t, 0, app.WithSoldOutTTL(time.Minute))
	_, err := svc.SetPrice(context.Background(), "MUG-2", 100, "CNY", 0, "test")
	require.NoError(t, err)
	require.ErrorIs(t, buy(svc, "k1", 1), app.ErrSoldOut)
	srv.Stop()
	before := rows()
	require.ErrorIs(t, buy(svc, "k2", 1), app.ErrSoldOut)
	assert.Equal(t, before, rows(), "no order for a buyer of a SKU remembered sold out")
	_, _, err = svc.PlaceOrder(context.Background(), app.PlaceOrderRequest{
		IdempotencyKey: "k3", BuyerID: "u-k3", Items: []app.ItemRequest{{SKU: "MUG-2", Qty: 1}},
	})
	require.NoError(t, err, "a SKU not remembered takes the database path")
}

// TestGiveBackIsSeenAfterTheTTL: units given back to the gate by another replica reach the
// next buyer once the memory expires; given back through this service, at once.
func TestGiveBackIsSeenAfterTheTTL(t *testing.T) {
	const ttl = 200 * time.Millisecond
	ctx := context.Background()
	svc, g, _, _ := gated(t, 1, app.WithSoldOutTTL(ttl))
	first, _, err := svc.PlaceOrder(ctx, app.PlaceOrderRequest{IdempotencyKey: "k1", BuyerID: "u1", Items: cup(1)})
	require.NoError(t, err)
	require.ErrorIs(t, buy(svc, "k2", 1), app.ErrSoldOut)

	n, err := g.GiveBack(ctx, first.ID()) // as another replica's consumer would
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	time.Sleep(ttl + 50*time.Millisecond) // past the TTL on a monotonic clock: not a timing assert
	assert.False(t, svc.MaybeSoldOut(), "the memory expired")
	assert.NoError(t, svc.KnownSoldOut(ctx, cup(1)))
	_, _, err = svc.PlaceOrder(ctx, app.PlaceOrderRequest{IdempotencyKey: "k3", BuyerID: "u3", Items: cup(1)})
	require.NoError(t, err, "the unit given back is sold")

	// Sold out again, remembered for longer than the test; this service's own give-back
	// forgets at once.
	slow, g2, _, _ := gated(t, 1, app.WithSoldOutTTL(time.Hour))
	o, _, err := slow.PlaceOrder(ctx, app.PlaceOrderRequest{IdempotencyKey: "k1", BuyerID: "u1", Items: cup(1)})
	require.NoError(t, err)
	require.ErrorIs(t, buy(slow, "k2", 1), app.ErrSoldOut)
	require.ErrorIs(t, slow.KnownSoldOut(ctx, cup(1)), app.ErrSoldOut)
	require.NoError(t, slow.GiveBack(ctx, o.ID()))
	assert.NoError(t, slow.KnownSoldOut(ctx, cup(1)))
	require.NoError(t, buy(slow, "k3", 1))
	st, err := g2.State(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Zero(t, st.Remaining)
}
