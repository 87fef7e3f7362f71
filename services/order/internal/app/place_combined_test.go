package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
)

// setupCombined is setup with PlaceOrder's writes combined, on a pool wide enough for the
// fallback and the reads.
func setupCombined(t *testing.T) (*app.Service, *pgxpool.Pool) {
	t.Helper()
	pool, _ := pgtest.New(t, postgres.Schemas()...)
	store := postgres.New(pool)
	repo := app.Combine(store, combine.Options{MaxBatch: 64})
	t.Cleanup(repo.Close)
	svc := app.New(repo, store, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Policy{PaymentWindow: time.Minute})
	_, err := svc.SetPrice(context.Background(), "CUP-1", 100, "CNY", 0, "test")
	require.NoError(t, err)
	return svc, pool
}

func scalar(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

func TestCombinedPlaceOrdersEachGetTheirOwnOrder(t *testing.T) {
	svc, pool := setupCombined(t)
	const n = 300
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			o, created, err := svc.PlaceOrder(context.Background(), app.PlaceOrderRequest{
				IdempotencyKey: fmt.Sprintf("k-%d", i), BuyerID: fmt.Sprintf("u%d", i), Currency: "CNY",
				Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 1 + int64(i)%3}},
			})
			if assert.NoError(t, err) && assert.True(t, created) {
				ids[i] = o.ID()
				assert.Equal(t, fmt.Sprintf("u%d", i), o.BuyerID(), "the caller's own order")
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range ids {
		assert.False(t, seen[id], "distinct orders")
		seen[id] = true
	}
	assert.Equal(t, n, scalar(t, pool, `SELECT count(*) FROM orders`))
	assert.Equal(t, n, scalar(t, pool, `SELECT count(*) FROM order_history`))
	assert.Equal(t, n, scalar(t, pool, `SELECT count(*) FROM outbox WHERE subject LIKE 'order.created.%'`))
	assert.Equal(t, n, scalar(t, pool, `SELECT count(DISTINCT o.id) FROM outbox x
		JOIN orders o ON o.id = convert_from(x.data, 'UTF8')::jsonb->'data'->>'order_id'`), "one order.created per order")
	assert.Less(t, scalar(t, pool, `SELECT count(DISTINCT xmin::text) FROM orders`), n, "orders were combined")
}

func TestCombinedDuplicatesOfOneKeyMakeOneOrder(t *testing.T) {
	svc, pool := setupCombined(t)
	const n = 50
	ids := make([]string, n)
	created := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			o, c, err := svc.PlaceOrder(context.Background(), app.PlaceOrderRequest{
				IdempotencyKey: "same", BuyerID: "u1", Currency: "CNY",
				Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 1}},
			})
			if assert.NoError(t, err) {
				ids[i], created[i] = o.ID(), c
			}
		})
	}
	wg.Wait()
	winners := 0
	for i := range n {
		assert.Equal(t, ids[0], ids[i], "every request sees the one order")
		if created[i] {
			winners++
		}
	}
	assert.Equal(t, 1, winners)
	assert.Equal(t, 1, scalar(t, pool, `SELECT count(*) FROM orders`))
	assert.Equal(t, 1, scalar(t, pool, `SELECT count(*) FROM outbox`))

	_, _, err := svc.PlaceOrder(context.Background(), app.PlaceOrderRequest{
		IdempotencyKey: "same", BuyerID: "u2", Currency: "CNY",
		Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 1}},
	})
	assert.ErrorIs(t, err, app.ErrIdempotencyConflict, "another request under the key")
}
