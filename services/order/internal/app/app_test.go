package app_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/order"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
)

func setup(t *testing.T, paymentWindow time.Duration) *app.Service {
	t.Helper()
	pool, _ := pgtest.New(t, postgres.Schemas()...)
	return newService(t, pool, paymentWindow)
}

// newService is a Service on pool with CUP-1 on sale at 100 CNY.
func newService(t *testing.T, pool *pgxpool.Pool, paymentWindow time.Duration) *app.Service {
	t.Helper()
	store := postgres.New(pool)
	svc := app.New(store, store, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Policy{PaymentWindow: paymentWindow})
	_, err := svc.SetPrice(context.Background(), "CUP-1", 100, "CNY", 0, "test")
	require.NoError(t, err)
	return svc
}

func place(t *testing.T, svc *app.Service, key string, timeout time.Duration) (*order.Order, bool) {
	t.Helper()
	o, created, err := svc.PlaceOrder(context.Background(), app.PlaceOrderRequest{
		IdempotencyKey: key, BuyerID: "u1", Currency: "CNY", PaymentTimeout: timeout,
		Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 1, UnitPrice: new(int64(100))}},
	})
	require.NoError(t, err)
	return o, created
}

func TestFollowReportsWhatItDid(t *testing.T) {
	ctx := context.Background()
	svc := setup(t, time.Minute)
	o, _ := place(t, svc, "k", 0)
	lock := func(o *order.Order, at time.Time) (bool, error) { return o.StockLocked(at) }
	release := func(o *order.Order, at time.Time) (bool, error) { return o.StockReleased(at, order.ReleaseTimeout) }
	sell := func(o *order.Order, at time.Time) (bool, error) { return o.StockSold(at, false) }
	in := func(id string) inbox.Message { return inbox.Message{Consumer: "c", ID: id} }

	steps := []struct {
		name    string
		msg     string
		orderID string
		apply   app.Apply
		want    app.Result
	}{
		{"a fresh outcome applies", "m1", o.ID(), lock, app.Applied},
		{"the same message again is a duplicate", "m1", o.ID(), lock, app.Duplicate},
		{"the same fact in a new message changes nothing", "m2", o.ID(), lock, app.Unchanged},
		{"a sale applies", "m3", o.ID(), sell, app.Applied},
		{"a release after the sale is ignored", "m4", o.ID(), release, app.Ignored},
		{"the ignored message is not reconsidered", "m4", o.ID(), release, app.Duplicate},
		{"an unknown order is acknowledged", "m5", "nope", lock, app.UnknownOrder},
	}
	for _, s := range steps {
		got, err := svc.Follow(ctx, in(s.msg), s.orderID, "test", s.apply)
		require.NoError(t, err, s.name)
		assert.Equal(t, s.want, got, s.name)
	}
	final, err := svc.Get(ctx, o.ID())
	require.NoError(t, err)
	assert.Equal(t, order.Paid, final.Status())
	assert.Len(t, final.History(), 3)
}

func TestReplayIgnoresAChangedDefault(t *testing.T) {
	pool, _ := pgtest.New(t, postgres.Schemas()...)
	first, created := place(t, newService(t, pool, time.Minute), "k", 0)
	require.True(t, created)
	// The service restarted with another ORDER_PAYMENT_WINDOW: the retry is still the same request.
	again, created := place(t, newService(t, pool, time.Hour), "k", 0)
	assert.False(t, created)
	assert.Equal(t, first.Snapshot(), again.Snapshot())
}
