package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/order"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 123456000, time.UTC)

func setup(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := pgtest.New(t, postgres.Schemas()...)
	return postgres.New(pool), pool
}

func newOrder(t *testing.T, id string) *order.Order {
	t.Helper()
	a, err := order.NewItem("CUP-1", 2, 4900)
	require.NoError(t, err)
	b, err := order.NewItem("MUG-2", 1, 0)
	require.NoError(t, err)
	o, err := order.New(id, "u1", []order.Item{a, b}, "CNY", 10*time.Minute, t0)
	require.NoError(t, err)
	return o
}

func message(t *testing.T, ev events.Event) []events.Message {
	t.Helper()
	m, err := events.Encode(ev, t0)
	require.NoError(t, err)
	return []events.Message{m}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestCreateThenGetRoundTrips(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	o := newOrder(t, "o1")
	stored, created, err := store.Create(ctx, o, "key-1", []byte("h1"), message(t, events.OrderCreated{OrderID: "o1"}))
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, o.Snapshot(), stored.Snapshot())

	got, err := store.Get(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, o.Snapshot(), got.Snapshot(), "lines, history and times survive the round trip")
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM outbox WHERE subject LIKE 'order.created.%'`))
}

func TestGetUnknownIsNotFound(t *testing.T) {
	store, _ := setup(t)
	_, err := store.Get(context.Background(), "nope")
	assert.ErrorIs(t, err, order.ErrNotFound)
}

func TestCreateWithUsedKey(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	first := newOrder(t, "o1")
	_, _, err := store.Create(ctx, first, "key-1", []byte("h1"), message(t, events.OrderCreated{OrderID: "o1"}))
	require.NoError(t, err)

	t.Run("same request returns the first order and stores nothing", func(t *testing.T) {
		stored, created, err := store.Create(ctx, newOrder(t, "o2"), "key-1", []byte("h1"), message(t, events.OrderCreated{OrderID: "o2"}))
		require.NoError(t, err)
		assert.False(t, created)
		assert.Equal(t, first.Snapshot(), stored.Snapshot())
	})
	t.Run("another request is a conflict", func(t *testing.T) {
		_, _, err := store.Create(ctx, newOrder(t, "o3"), "key-1", []byte("h2"), message(t, events.OrderCreated{OrderID: "o3"}))
		assert.ErrorIs(t, err, app.ErrIdempotencyConflict)
	})
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders`))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM outbox`))
}

func TestConcurrentCreatesWithOneKeyMakeOneOrder(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	const n = 8
	var wg sync.WaitGroup
	ids := make([]string, n)
	createdCount := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			o := newOrder(t, fmt.Sprintf("o%d", i))
			stored, created, err := store.Create(ctx, o, "same-key", []byte("h"), message(t, events.OrderCreated{OrderID: o.ID()}))
			errs[i] = err
			if err == nil {
				ids[i], createdCount[i] = stored.ID(), created
			}
		})
	}
	wg.Wait()
	winners := 0
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, ids[0], ids[i], "every request sees the one order")
		if createdCount[i] {
			winners++
		}
	}
	assert.Equal(t, 1, winners)
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders`))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM outbox`))
}

func TestUpdateStoresTheChangeAndItsEvents(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	_, _, err := store.Create(ctx, newOrder(t, "o1"), "k", []byte("h"), nil)
	require.NoError(t, err)

	_, err = store.UpdateWith(ctx, "o1", nil, func(o *order.Order) ([]events.Message, error) {
		_, err := o.RequestCancel(t0.Add(time.Second), "buyer")
		return message(t, events.OrderCancelRequested{OrderID: "o1"}), err
	})
	require.NoError(t, err)
	got, err := store.Get(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, t0.Add(time.Second), got.CancelRequestedAt())
	require.Len(t, got.History(), 2)
	assert.Equal(t, "cancel requested: buyer", got.History()[1].Reason)
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM outbox WHERE subject = 'order.cancel_requested'`))

	require.NoError(t, store.Update(ctx, "o1", func(o *order.Order) error {
		_, err := o.StockLocked(t0.Add(2 * time.Second))
		return err
	}))
	got, err = store.Get(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, order.AwaitingPayment, got.Status())
	assert.Len(t, got.History(), 3)
}

func TestUpdateErrorRollsBackEverything(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	_, _, err := store.Create(ctx, newOrder(t, "o1"), "k", []byte("h"), nil)
	require.NoError(t, err)
	boom := errors.New("boom")
	dup, err := store.UpdateWith(ctx, "o1", &inbox.Message{Consumer: "c", ID: "m1"}, func(o *order.Order) ([]events.Message, error) {
		_, err := o.StockLocked(t0)
		require.NoError(t, err)
		return message(t, events.OrderShipped{OrderID: "o1"}), boom
	})
	assert.ErrorIs(t, err, boom)
	assert.False(t, dup)
	got, err := store.Get(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, order.Pending, got.Status())
	assert.Len(t, got.History(), 1)
	assert.Equal(t, 0, count(t, pool, `SELECT count(*) FROM outbox`))
	assert.Equal(t, 0, count(t, pool, `SELECT count(*) FROM inbox`), "the claim rolls back with the effect")
}

func TestUpdateWithSkipsAClaimedMessage(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	_, _, err := store.Create(ctx, newOrder(t, "o1"), "k", []byte("h"), nil)
	require.NoError(t, err)
	in := &inbox.Message{Consumer: "order-stock-outcomes", ID: "ev-1"}
	calls := 0
	apply := func(o *order.Order) ([]events.Message, error) {
		calls++
		o.Note(t0, "noted")
		return nil, nil
	}
	dup, err := store.UpdateWith(ctx, "o1", in, apply)
	require.NoError(t, err)
	assert.False(t, dup)
	dup, err = store.UpdateWith(ctx, "o1", in, apply)
	require.NoError(t, err)
	assert.True(t, dup)
	assert.Equal(t, 1, calls)
	got, err := store.Get(ctx, "o1")
	require.NoError(t, err)
	assert.Len(t, got.History(), 2)
}

func TestUpdateUnknownOrder(t *testing.T) {
	store, _ := setup(t)
	err := store.Update(context.Background(), "nope", func(*order.Order) error {
		t.Fatal("fn called for a missing order")
		return nil
	})
	assert.ErrorIs(t, err, order.ErrNotFound)
}

func TestConcurrentUpdatesSerialiseOnTheOrder(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	_, _, err := store.Create(ctx, newOrder(t, "o1"), "k", []byte("h"), nil)
	require.NoError(t, err)
	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = store.Update(ctx, "o1", func(o *order.Order) error {
				o.Note(t0, fmt.Sprintf("note %d", i))
				return nil
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, err := store.Get(ctx, "o1")
	require.NoError(t, err)
	assert.Len(t, got.History(), n+1, "no update lost another's history entry")
}

func TestOnlySoldWinsAgainstConcurrentRelease(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	_, _, err := store.Create(ctx, newOrder(t, "o1"), "k", []byte("h"), nil)
	require.NoError(t, err)
	require.NoError(t, store.Update(ctx, "o1", func(o *order.Order) error { _, err := o.StockLocked(t0); return err }))

	// Sold and a stale timeout release race; whichever commits second sees the first's
	// status. Either order is legal, but the order ends up in a state one of them explains.
	var wg sync.WaitGroup
	var soldErr, releaseErr error
	wg.Go(func() {
		soldErr = store.Update(ctx, "o1", func(o *order.Order) error { _, err := o.StockSold(t0, false); return err })
	})
	wg.Go(func() {
		releaseErr = store.Update(ctx, "o1", func(o *order.Order) error { _, err := o.StockReleased(t0, order.ReleaseTimeout); return err })
	})
	wg.Wait()
	got, err := store.Get(ctx, "o1")
	require.NoError(t, err)
	require.NoError(t, soldErr, "sold is allowed from awaiting_payment and from closed")
	assert.Equal(t, order.Paid, got.Status())
	if releaseErr != nil {
		assert.ErrorIs(t, releaseErr, order.ErrInvalidTransition, "a release after the sale is refused")
	}
}

func TestHistoryIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	_, _, err := store.Create(ctx, newOrder(t, "o1"), "k", []byte("h"), nil)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE order_history SET reason = 'rewritten'`)
	assert.ErrorContains(t, err, "append-only")
	_, err = pool.Exec(ctx, `DELETE FROM order_history`)
	assert.ErrorContains(t, err, "append-only")
}
