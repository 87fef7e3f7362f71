package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// placeOrders creates n single-unit orders concurrently and returns their ids.
func placeOrders(t *testing.T, c client, sku string, n int) []string {
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ids[i] = c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 100})
		})
	}
	wg.Wait()
	return ids
}

func countLedger(t *testing.T, c client, sku, changeType string) int {
	n, after := 0, 0.0
	for {
		status, body := c.call("GET", fmt.Sprintf("%s/v1/skus/%s/ledger?limit=1000&after=%d", sys.URLs["stock"], sku, int64(after)), nil, nil)
		require.Equal(t, http.StatusOK, status)
		for _, e := range body["entries"].([]any) {
			if e.(map[string]any)["change_type"] == changeType {
				n++
			}
		}
		next, ok := body["next_after"].(float64)
		if !ok {
			return n
		}
		after = next
	}
}

func TestStockKilledMidFlowCompletesWithoutDoubleApply(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 1000)
	var ids []string
	done := make(chan struct{})
	go func() { ids = placeOrders(t, c, sku, 150); close(done) }()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, sys.Kill("stock"), "SIGKILL stock while it locks")
	<-done
	require.NoError(t, sys.Start(context.Background(), "stock"))
	require.NoError(t, sys.WaitReady(context.Background(), "stock", 60*time.Second))
	for _, id := range ids {
		c.waitStatus(id, "awaiting_payment", 30*time.Second)
	}
	assert.Equal(t, [4]float64{1000, 850, 150, 0}, figures(c, sku))
	assert.Equal(t, 150, countLedger(t, c, sku, "lock"), "one lock row per order, none doubled by redelivery")
	c.requireConsistent()
}

func TestOrderKilledAfterCommitStillPublishes(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 100)
	ids := placeOrders(t, c, sku, 40)
	require.NoError(t, sys.Kill("order"), "SIGKILL order with outbox rows maybe unpublished")
	require.NoError(t, sys.Start(context.Background(), "order"))
	require.NoError(t, sys.WaitReady(context.Background(), "order", 60*time.Second))
	for _, id := range ids {
		c.waitStatus(id, "awaiting_payment", 30*time.Second)
	}
	assert.Equal(t, 40, countLedger(t, c, sku, "lock"))
	c.requireConsistent()
}

// TestReplayedOrderCreatedChangesNothing publishes a copy of an order.created message under a
// new Nats-Msg-Id, so JetStream dedup lets it through: the stock inbox must absorb it.
func TestReplayedOrderCreatedChangesNothing(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 10)
	id := c.order("30m", item{SKU: sku, Qty: 4, UnitPrice: 100})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)

	nc, err := nats.Connect(sys.NATSURL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, "ORDER")
	require.NoError(t, err)
	// Find this order's order.created among the stream's messages.
	var data []byte
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0; seq-- {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if strings.HasPrefix(m.Subject, "order.created.") && contains(m.Data, id) { // order.created.<partition>.<key>
			data = m.Data
			break
		}
	}
	require.NotNil(t, data, "order.created of %s not found", id)
	var last uint64
	replays := map[string]bool{} // stream sequences, as the dead-letter header writes them
	for i := range 3 {
		ack, err := js.Publish(ctx, "order.created", data, jetstream.WithMsgID(fmt.Sprintf("replay-%d-%s", i, id)))
		require.NoError(t, err)
		last, replays[fmt.Sprint(ack.Sequence)] = ack.Sequence, true
	}
	// The replays, on the bare subject as a producer from before the key publishes, were
	// handled once stock's unpartitioned order.created consumer has acknowledged every message
	// up to the last of them — absorbed by the inbox it shares with the partitions' consumers,
	// which locked the original, not dead-lettered.
	cons, err := js.Consumer(ctx, "ORDER", "stock-order-created")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Stream >= last
	}, 10*time.Second, 20*time.Millisecond, "stock never acknowledged the replays")
	if dl, err := js.Stream(ctx, "DEADLETTER"); assert.NoError(t, err) {
		if m, err := dl.GetLastMsgForSubject(ctx, "deadletter.order.created"); err == nil {
			assert.False(t, replays[m.Header.Get("Stockflow-DL-Stream-Seq")], "a replay was dead-lettered, not absorbed")
		}
	}
	assert.Equal(t, [4]float64{10, 6, 4, 0}, figures(c, sku))
	assert.Equal(t, 1, countLedger(t, c, sku, "lock"))
	assert.Equal(t, "awaiting_payment", c.getOrder(id)["status"])
	c.requireConsistent()
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// BenchmarkPostToAwaitingPayment measures how long an order takes from POST /v1/orders until
// GET shows awaiting_payment (lock done and followed), over b.N orders from 16 clients.
func BenchmarkPostToAwaitingPayment(b *testing.B) {
	c := client{b}
	sku := "BENCH-" + randomHex(4)
	c.createSKU(sku, int64(b.N)+10)
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	b.ResetTimer()
	for i := range b.N {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 100})
			for c.getOrder(id)["status"] != "awaiting_payment" {
				time.Sleep(10 * time.Millisecond) // polling harder would take the CPU from the system under test
			}
			lat[i] = time.Since(start)
		})
	}
	wg.Wait()
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// TestAnOpenTransactionInOneServiceDoesNotStopTheOthers: a write transaction left open in the
// timeout service's database (a psql session at BEGIN; INSERT …) does not hold back the order
// and stock services' outbox relays: an order still reaches awaiting_payment at once (review F8).
func TestAnOpenTransactionInOneServiceDoesNotStopTheOthers(t *testing.T) {
	c := client{t}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, sys.ServiceDatabaseURL("timeout"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO inbox (consumer, message_id) VALUES ('psql', 'left-open')`)
	require.NoError(t, err)

	sku := "F8-" + randomHex(3)
	c.createSKU(sku, 3)
	id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 4900})
	c.waitStatus(id, "awaiting_payment", 5*time.Second)
	require.NoError(t, tx.Rollback(ctx))
	c.requireConsistent()
}
