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

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

func newOrders(t *testing.T, keys ...string) []app.NewOrder {
	t.Helper()
	out := make([]app.NewOrder, len(keys))
	for i, k := range keys {
		id := fmt.Sprintf("o%d-%s", i, k)
		out[i] = app.NewOrder{Order: newOrder(t, id), Key: k, RequestHash: []byte("h"), Msgs: message(t, events.OrderCreated{OrderID: id})}
	}
	return out
}

func TestCreateAllStoresWhatCreateWould(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	orders := newOrders(t, "k3", "k1", "k2")
	res, err := store.CreateAll(ctx, orders)
	require.NoError(t, err)
	require.Len(t, res, 3)
	for i, r := range res {
		require.NoError(t, r.Err)
		assert.True(t, r.Created)
		assert.Equal(t, orders[i].Order.ID(), r.Order.ID(), "answers in request order")
		got, err := store.Get(ctx, r.Order.ID())
		require.NoError(t, err)
		assert.Equal(t, orders[i].Order.Snapshot(), got.Snapshot(), "lines and history round-trip")
	}
	assert.Equal(t, 3, count(t, pool, `SELECT count(*) FROM outbox`))
	assert.Equal(t, 1, count(t, pool, `SELECT count(DISTINCT xmin::text) FROM orders`), "one transaction")
}

func TestCreateAllWithAKeyTwiceBehavesAsOneAfterTheOther(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	orders := newOrders(t, "k", "k", "k", "other")
	orders[2].RequestHash = []byte("another request")
	res, err := store.CreateAll(ctx, orders)
	require.NoError(t, err)

	require.NoError(t, res[0].Err)
	assert.True(t, res[0].Created, "the first of the key creates")
	require.NoError(t, res[1].Err)
	assert.False(t, res[1].Created, "the same request again replays")
	assert.Equal(t, orders[0].Order.Snapshot(), res[1].Order.Snapshot())
	assert.NotSame(t, res[0].Order, res[1].Order, "each caller gets its own order")
	assert.ErrorIs(t, res[2].Err, app.ErrIdempotencyConflict, "another request under the key conflicts")
	assert.Nil(t, res[2].Order)
	require.NoError(t, res[3].Err)
	assert.True(t, res[3].Created)

	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM orders`))
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM outbox`))
}

func TestCreateAllAnswersEachKeyUsedBefore(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	earlier := newOrder(t, "earlier")
	_, _, err := store.Create(ctx, earlier, "used", []byte("h"), message(t, events.OrderCreated{OrderID: "earlier"}))
	require.NoError(t, err)

	orders := newOrders(t, "used", "fresh", "used")
	orders[0].RequestHash = []byte("another request")
	res, err := store.CreateAll(ctx, orders)
	require.NoError(t, err)
	assert.ErrorIs(t, res[0].Err, app.ErrIdempotencyConflict, "a conflict fails only its own request")
	require.NoError(t, res[1].Err)
	assert.True(t, res[1].Created)
	require.NoError(t, res[2].Err)
	assert.False(t, res[2].Created)
	assert.Equal(t, earlier.Snapshot(), res[2].Order.Snapshot(), "the retry gets the earlier order")

	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM orders`))
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM outbox`))
}

// blocked is a combined store with one flusher whose first batch waits on an open
// transaction holding the key "block": the Creates started meanwhile queue up for the next
// batch. release commits that transaction.
type blocked struct {
	repo    *app.CombiningRepository
	pool    *pgxpool.Pool
	first   chan error // the answer of the Create that waits on the key
	release func()
}

func combineAndBlock(t *testing.T) blocked {
	t.Helper()
	ctx := context.Background()
	store, pool := setup(t)
	repo := app.Combine(store, combine.Options{MaxBatch: 128, Flushers: 1})
	t.Cleanup(repo.Close)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, `INSERT INTO orders (id, idempotency_key, request_hash, buyer_id, currency, total,
		payment_timeout_ns, status, created_at, expires_at, updated_at)
		VALUES ('blocker', 'block', 'h', 'u1', 'CNY', 0, 1, 'pending', now(), now(), now())`)
	require.NoError(t, err)
	b := blocked{repo: repo, pool: pool, first: make(chan error, 1), release: func() { require.NoError(t, tx.Commit(ctx)) }}
	go func() {
		_, _, err := repo.Create(ctx, newOrder(t, "waits"), "block", []byte("x"), message(t, events.OrderCreated{OrderID: "waits"}))
		b.first <- err
	}()
	require.Eventually(t, func() bool {
		return count(t, pool, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()`) > 0
	}, 5*time.Second, 5*time.Millisecond, "the first batch waits on the key")
	return b
}

// createConcurrently runs repo.Create for ids (key k<i>) at once, waits until they are all
// queued behind the blocked batch, releases it and returns their errors.
func createConcurrently(t *testing.T, b blocked, ids []string) []error {
	t.Helper()
	ctx := context.Background()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			_, _, errs[i] = b.repo.Create(ctx, newOrder(t, id), fmt.Sprintf("k%d", i), []byte("h"), message(t, events.OrderCreated{OrderID: id}))
		})
	}
	time.Sleep(100 * time.Millisecond) // every Create is queued: nothing else can run
	b.release()
	assert.ErrorIs(t, <-b.first, app.ErrIdempotencyConflict)
	wg.Wait()
	return errs
}

func TestCombinedCreatesShareOneTransaction(t *testing.T) {
	b := combineAndBlock(t)
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("o%d", i)
	}
	for _, err := range createConcurrently(t, b, ids) {
		assert.NoError(t, err)
	}
	assert.Equal(t, 20, count(t, b.pool, `SELECT count(*) FROM orders WHERE id <> 'blocker'`))
	assert.Equal(t, 1, count(t, b.pool, `SELECT count(DISTINCT xmin::text) FROM orders WHERE id <> 'blocker'`))
	assert.Equal(t, 20, count(t, b.pool, `SELECT count(*) FROM outbox`))
}

func TestCombinedCreateThatFailsTheBatchFailsAlone(t *testing.T) {
	b := combineAndBlock(t)
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("o%d", i)
	}
	ids[7] = "blocker" // its row clashes with the blocker's id: the batch's INSERT fails
	for i, err := range createConcurrently(t, b, ids) {
		if i == 7 {
			assert.Error(t, err, "the clashing order fails")
			continue
		}
		assert.NoError(t, err, "order %d", i)
	}
	assert.Equal(t, 19, count(t, b.pool, `SELECT count(*) FROM orders WHERE id <> 'blocker'`))
	assert.Equal(t, 19, count(t, b.pool, `SELECT count(*) FROM outbox`))
}

// TestUpdateAllUndoesAFailingUpdateAlone: an update of an unknown order and one whose fn fails
// share a batch with good ones; the good ones commit, the failing ones leave nothing, and a
// message claimed twice in the batch is applied once.
func TestUpdateAllUndoesAFailingUpdateAlone(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	_, err := store.CreateAll(ctx, newOrders(t, "a", "b"))
	require.NoError(t, err)
	note := func(o *order.Order) ([]events.Message, error) {
		o.Note(time.Now(), "noted")
		return message(t, events.OrderCancelRequested{OrderID: o.ID()}), nil
	}
	boom := errors.New("boom")
	in := &inbox.Message{Consumer: "c", ID: "m-1"}
	res, err := store.UpdateAll(ctx, []app.Update{
		{ID: "o1-b", Fn: note},
		{ID: "nope", Fn: note},
		{ID: "o0-a", In: in, Fn: note},
		{ID: "o0-a", Fn: func(o *order.Order) ([]events.Message, error) { o.Note(time.Now(), "undone"); return nil, boom }},
		{ID: "o0-a", In: in, Fn: note},
	})
	require.NoError(t, err)
	assert.NoError(t, res[0].Err)
	assert.ErrorIs(t, res[1].Err, order.ErrNotFound)
	assert.NoError(t, res[2].Err)
	assert.ErrorIs(t, res[3].Err, boom)
	assert.True(t, res[4].Duplicate, "the same message again in the batch")
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM order_history WHERE reason = 'noted'`))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM order_history WHERE reason = 'undone'`))
	assert.Equal(t, 2+2, count(t, pool, `SELECT count(*) FROM outbox`), "two creations, two notes")
}

// TestCombinedUpdatesOfOneOrderAllApply: concurrent UpdateWith calls on one order, combined,
// each see the changes of the ones before.
func TestCombinedUpdatesOfOneOrderAllApply(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	repo := app.Combine(store, combine.Options{MaxBatch: 32})
	t.Cleanup(repo.Close)
	_, err := store.CreateAll(ctx, newOrders(t, "a"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, err := repo.UpdateWith(ctx, "o0-a", &inbox.Message{Consumer: "c", ID: fmt.Sprint(i)}, func(o *order.Order) ([]events.Message, error) {
				o.Note(time.Now(), "noted")
				return nil, nil
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, 50, count(t, pool, `SELECT count(*) FROM order_history WHERE reason = 'noted'`))
	assert.Equal(t, 50, count(t, pool, `SELECT count(*) FROM inbox`))
}
