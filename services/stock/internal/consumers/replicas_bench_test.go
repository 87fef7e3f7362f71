package consumers_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/consumers"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
)

// BenchmarkOrderCreatedReplicas measures how fast stock replicas lock a backlog of b.N
// order.created of one hot SKU, or of 16 taken in turn (one unit each, enough stock for all:
// a multi-SKU flash sale): the events wait in the
// stream, then the replicas start — each with its own pool, NATS connection, consumers and
// outbox relay, as a process has — and the clock runs until the ledger holds b.N lock rows.
//
//	replicas=1          one replica
//	replicas=2/pinned   two, each partition pinned to one of them (a SKU's locks on one)
//	replicas=2/shared   two pulling every partition (no PriorityGroup): as before partitions,
//	                    both replicas lock every SKU and their batches queue on the same rows
//
// It reports locks/s and orders per lock batch (lock rows per distinct ledger time: a batch
// writes its ledger rows in one statement).
// NATS is embedded without sync_interval: always, so the figures are stock's and the
// database's. go test -run '^$' -bench OrderCreatedReplicas -benchtime 5000x ./internal/consumers/
func BenchmarkOrderCreatedReplicas(b *testing.B) {
	for _, skus := range []int{1, 16} {
		for _, c := range []struct {
			name     string
			replicas int
			pinned   bool
		}{{"replicas=1", 1, true}, {"replicas=2/pinned", 2, true}, {"replicas=2/shared", 2, false}} {
			b.Run(fmt.Sprintf("skus=%d/%s", skus, c.name), func(b *testing.B) { benchReplicas(b, skus, c.replicas, c.pinned) })
		}
	}
}

func benchReplicas(b *testing.B, skus, replicas int, pinned bool) {
	ctx := context.Background()
	pool, dbURL := pgtest.New(b, service.Schemas(postgres.Schema)...)
	natsURL := natstest.Start(b)
	nc, js, err := natsx.Connect(ctx, natsURL, "bench")
	require.NoError(b, err)
	b.Cleanup(nc.Close)
	require.NoError(b, natsx.ApplyStreams(ctx, js, 1))
	for k := range skus {
		_, err = app.New(postgres.NewStore(pool)).CreateSKU(ctx, fmt.Sprintf("HOT-%d", k), int64(b.N), "bench")
		require.NoError(b, err)
	}
	backlog(b, js, b.N, skus)

	b.ResetTimer()
	start := time.Now()
	for r := range replicas {
		startReplica(b, dbURL, natsURL, fmt.Sprintf("replica-%d", r+1), pinned)
	}
	var locks, batches int
	deadline := time.Now().Add(5 * time.Minute)
	for locks < b.N {
		require.True(b, time.Now().Before(deadline), "%d of %d locked after 5 minutes", locks, b.N)
		time.Sleep(10 * time.Millisecond)
		require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM stock_ledger WHERE change_type = 'lock'`).Scan(&locks))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	require.NoError(b, pool.QueryRow(ctx, `SELECT count(DISTINCT created_at) FROM stock_ledger WHERE change_type = 'lock'`).Scan(&batches))
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "locks/s")
	b.ReportMetric(float64(b.N)/float64(batches), "orders/batch")
}

// backlog publishes n order.created of HOT-0 … HOT-<skus-1> in turn, as the order service's relay does (async, with
// their event ids as Nats-Msg-Id), and waits for every ack.
func backlog(b *testing.B, js jetstream.JetStream, n, skus int) {
	b.Helper()
	deadline := time.Now().Add(time.Hour)
	for i := range n {
		m, err := events.Encode(orderCreated(fmt.Sprintf("o-%d", i), fmt.Sprintf("HOT-%d", i%skus), 1), deadline)
		require.NoError(b, err)
		_, err = js.PublishAsync(m.Subject, m.Data, jetstream.WithMsgID(m.ID))
		require.NoError(b, err)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("backlog not acked within a minute")
	}
}

// startReplica runs what one stock process runs on the order.created path: its consumers
// (pinned or not) and its outbox relay, on a pool and a NATS connection of its own.
func startReplica(b *testing.B, dbURL, natsURL, name string, pinned bool) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(b, err)
	nc, js, err := natsx.Connect(ctx, natsURL, name)
	require.NoError(b, err)
	log := slog.New(slog.DiscardHandler)
	svc := app.New(postgres.NewStore(pool))
	var stops []func()
	for _, c := range consumers.All(svc) {
		if !pinned {
			c.Spec.PriorityGroup = ""
		}
		stop, err := natsx.Consume(ctx, js, c.Spec, c.Handle, log)
		require.NoError(b, err)
		stops = append(stops, stop)
	}
	relay := outbox.NewRelay(pool, js, outbox.RelayOptions{Logger: log})
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(ctx) }()
	b.Cleanup(func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
		if err := <-relayDone; err != nil {
			b.Errorf("%s: the relay: %v", name, err)
		}
		nc.Close()
		pool.Close()
	})
}
