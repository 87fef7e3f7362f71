package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	paymentpg "github.com/stockflow/stockflow/services/payment-adapter/internal/postgres"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
)

// TestConcurrentOrdersAreRememberedTogetherEachWithItsOwnRow: order.created handled at once
// share transactions, yet each order keeps its own total and trace, and redeliveries in the
// same rush store nothing more.
func TestConcurrentOrdersAreRememberedTogetherEachWithItsOwnRow(t *testing.T) {
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	sb, err := sandbox.New("app-test")
	require.NoError(t, err)
	reg, err := payment.NewRegistry(sb)
	require.NoError(t, err)
	svc := app.New(paymentpg.New(pool), reg, slog.New(slog.DiscardHandler))
	t.Cleanup(svc.Close)

	const n = 100
	traceparent := func(i int) string { return fmt.Sprintf("00-%032x-%016x-01", i+1, i+1) }
	var wg sync.WaitGroup
	for i := range n {
		ctx := telemetry.WithTraceparent(context.Background(), traceparent(i))
		ev := events.OrderCreated{OrderID: fmt.Sprintf("ord-%03d", i), Total: int64(100 + i), Currency: "CNY"}
		remember := func() {
			assert.NoError(t, svc.RememberOrder(ctx, inbox.Message{Consumer: "payment-adapter-order-created", ID: "created-" + ev.OrderID}, ev))
		}
		wg.Go(remember)
		if i%10 == 0 {
			wg.Go(remember) // redelivered
		}
	}
	wg.Wait()

	ctx := context.Background()
	var rows, transactions, claims int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM order_totals`).Scan(&rows, &transactions))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM inbox`).Scan(&claims))
	assert.Equal(t, n, rows)
	assert.Equal(t, n, claims, "each message claimed once")
	assert.Less(t, transactions, n/2, "orders handled at once share transactions")
	for i := range n {
		var total int64
		var trace string
		require.NoError(t, pool.QueryRow(ctx, `SELECT total, traceparent FROM order_totals WHERE order_id = $1`, fmt.Sprintf("ord-%03d", i)).
			Scan(&total, &trace))
		assert.Equal(t, int64(100+i), total)
		assert.Equal(t, traceparent(i), trace, "each order keeps its own caller's trace")
	}
}

// TestOfAnOrderCreatedTwiceInOneBatchTheFirstTotalStands: two order.created of one order (two
// messages) in the same batch — the total given first stands, whatever order the rows are
// inserted in; both messages are claimed.
func TestOfAnOrderCreatedTwiceInOneBatchTheFirstTotalStands(t *testing.T) {
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	ctx := context.Background()
	const n = 200
	var ins []inbox.Message
	var totals []payment.OrderTotal
	for k := range 2 {
		for i := range n {
			order := fmt.Sprintf("ord-%03d", (i*7)%n)
			ins = append(ins, inbox.Message{Consumer: "payment-adapter-order-created", ID: fmt.Sprintf("m%d-%s", k, order)})
			totals = append(totals, payment.OrderTotal{OrderID: order, Total: int64(100 + k), Currency: "CNY"})
		}
	}
	dup, err := paymentpg.New(pool).RememberOrders(ctx, ins, totals)
	require.NoError(t, err)
	assert.NotContains(t, dup, true, "two messages, neither processed before")
	var later, claims int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE total <> 100) FROM order_totals`).Scan(&later))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM inbox`).Scan(&claims))
	assert.Zero(t, later, "every order keeps the total given first")
	assert.Equal(t, 2*n, claims)
}
