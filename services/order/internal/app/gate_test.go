package app_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/gate/redistest"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
)

// gated is a Service (with opts) with CUP-1 on sale behind a gate armed with units, and the
// gate.
func gated(t *testing.T, units int64, opts ...app.Option) (*app.Service, *gate.Gate, *redistest.Server, func() int) {
	t.Helper()
	pool, _ := pgtest.New(t, postgres.Schemas()...)
	srv := redistest.Start(t)
	g, err := gate.New(gate.Config{RedisURL: srv.URL, Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	store := postgres.New(pool)
	svc := app.New(store, store, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Policy{PaymentWindow: time.Minute}, append([]app.Option{app.WithGate(g)}, opts...)...)
	_, err = svc.SetPrice(context.Background(), "CUP-1", 100, "CNY", 0, "test")
	require.NoError(t, err)
	require.NoError(t, g.Arm(context.Background(), "CUP-1", units))
	rows := func() int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM outbox)").Scan(&n))
		return n
	}
	return svc, g, srv, rows
}

func buy(svc *app.Service, key string, qty int64) error {
	_, _, err := svc.PlaceOrder(context.Background(), app.PlaceOrderRequest{
		IdempotencyKey: key, BuyerID: "u-" + key, Items: []app.ItemRequest{{SKU: "CUP-1", Qty: qty}},
	})
	return err
}

// TestSoldOutBuyersCostNoRow: once the gate is empty a buyer gets ErrSoldOut and no order or
// outbox row is written.
func TestSoldOutBuyersCostNoRow(t *testing.T) {
	svc, g, _, rows := gated(t, 2)
	require.NoError(t, buy(svc, "k1", 2))
	before := rows()
	err := buy(svc, "k2", 1)
	require.ErrorIs(t, err, app.ErrSoldOut)
	assert.Contains(t, err.Error(), "CUP-1")
	assert.Equal(t, before, rows(), "a sold-out buyer stores nothing")
	st, err := g.State(context.Background(), "CUP-1")
	require.NoError(t, err)
	assert.Zero(t, st.Remaining)
	assert.Len(t, st.Held, 1)
}

// TestRetriedRequestTakesOnce: a retry with the same idempotency key gets the first order,
// and what its fresh attempt took is given back at once.
func TestRetriedRequestTakesOnce(t *testing.T) {
	svc, g, _, _ := gated(t, 3)
	require.NoError(t, buy(svc, "same", 1))
	require.NoError(t, buy(svc, "same", 1))
	st, err := g.State(context.Background(), "CUP-1")
	require.NoError(t, err)
	assert.Equal(t, int64(2), st.Remaining, "one unit held, by the one order")
	assert.Len(t, st.Held, 1)
}

// TestGiveBackAfterRejectionOrRelease: the consumer's GiveBack returns the units once.
func TestGiveBackAfterRejectionOrRelease(t *testing.T) {
	svc, g, _, _ := gated(t, 1)
	o, _, err := svc.PlaceOrder(context.Background(), app.PlaceOrderRequest{IdempotencyKey: "k", BuyerID: "u", Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 1}}})
	require.NoError(t, err)
	require.ErrorIs(t, buy(svc, "k2", 1), app.ErrSoldOut)
	require.NoError(t, svc.GiveBack(context.Background(), o.ID()))
	require.NoError(t, svc.GiveBack(context.Background(), o.ID()), "a redelivered release")
	st, _ := g.State(context.Background(), "CUP-1")
	assert.Equal(t, int64(1), st.Remaining)
	require.NoError(t, buy(svc, "k3", 1), "the unit is for sale again")
}

// TestRedisDownTakesTheDatabasePath: with Redis gone buyers are not refused: orders are
// created as without a gate, and GiveBack reports the outage so the message is retried.
func TestRedisDownTakesTheDatabasePath(t *testing.T) {
	svc, _, srv, rows := gated(t, 0)
	require.ErrorIs(t, buy(svc, "k1", 1), app.ErrSoldOut)
	srv.Stop()
	before := rows()
	require.NoError(t, buy(svc, "k2", 1))
	assert.Greater(t, rows(), before)
	assert.ErrorIs(t, svc.GiveBack(context.Background(), "any"), gate.ErrUnavailable)
}

// TestABypassedOrderThatLockedIsCountedByTheGate: an order placed while Redis did not answer
// went the database path; when stock locks it, TakeLocked counts it, so the gate is sold out
// with the database instead of admitting a buyer stock would reject (and whose give-back
// would admit the next one). Counting it again, or an admitted order, takes nothing.
func TestABypassedOrderThatLockedIsCountedByTheGate(t *testing.T) {
	svc, g, srv, _ := gated(t, 1)
	ctx := context.Background()
	srv.Stop()
	o, created, err := svc.PlaceOrder(ctx, app.PlaceOrderRequest{
		IdempotencyKey: "k1", BuyerID: "u-k1", Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 1}},
	})
	require.NoError(t, err, "Redis gone: the database path")
	require.True(t, created)
	lines := []gate.Line{{SKU: "CUP-1", Qty: 1}}
	assert.ErrorIs(t, svc.TakeLocked(ctx, o.ID(), lines), gate.ErrUnavailable, "retried until Redis answers")

	srv.Restart()
	require.NoError(t, g.Arm(ctx, "CUP-1", 1), "armed before stock locked the bypassed order")
	require.NoError(t, svc.TakeLocked(ctx, o.ID(), lines))
	require.NoError(t, svc.TakeLocked(ctx, o.ID(), lines), "a redelivered lock outcome")
	st, err := g.State(ctx, "CUP-1")
	require.NoError(t, err)
	assert.Zero(t, st.Remaining, "the lock counted once")
	assert.ErrorIs(t, buy(svc, "k2", 1), app.ErrSoldOut, "sold out with the database")
	require.NoError(t, svc.GiveBack(ctx, o.ID()), "the order is released")
	require.NoError(t, buy(svc, "k3", 1), "its unit is for sale again")
}
