package reconcile_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/reconcile"
)

// The outbox job runs with a service's own NATS user on a locked-down server: the relay's
// repair publishes, consumer info, and the ordered consumer that reads DEADLETTER in several
// fetches all stay within the service's permissions.
func TestOutboxJobWorksWithAServiceUser(t *testing.T) {
	ctx := context.Background()
	l := natstest.StartLocked(t)
	anc, admin, err := natsx.Connect(ctx, l.As(natsx.AdminUser), "admin")
	require.NoError(t, err)
	defer anc.Close()
	require.NoError(t, natsx.ApplyStreams(ctx, admin, 1))
	present := natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "stock-order-created"}
	missing := natsx.ConsumerSpec{Stream: natsx.StreamPayment, Durable: "stock-payment-succeeded"}
	_, err = admin.CreateOrUpdateConsumer(ctx, present.Stream, jetstream.ConsumerConfig{Durable: present.Durable, AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	const deadLetters = 600 // more than one fetch of the job's ordered consumer
	for range deadLetters {
		m := nats.NewMsg(natsx.SubjectDeadLetterPrefix + events.SubjectOrderCreated)
		m.Header.Set(natsx.HeaderDLConsumer, present.Durable)
		m.Data = []byte(`{}`)
		_, err := admin.PublishMsg(ctx, m)
		require.NoError(t, err)
	}

	nc, js, err := natsx.Connect(ctx, l.As("stock"), "stock")
	require.NoError(t, err)
	defer nc.Close()
	var mu sync.Mutex
	var refusals []error
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		refusals = append(refusals, err)
		mu.Unlock()
	})
	pool, _ := pgtest.New(t, outbox.Schema, reconcile.Schema)
	require.NoError(t, postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		m, err := events.Encode(events.StockReleased{OrderID: "o-1", Reason: events.ReleaseTimeout}, time.Now())
		require.NoError(t, err)
		return outbox.Write(ctx, tx, m)
	}))
	time.Sleep(10 * time.Millisecond) // Age 0: the row is older than the run
	relay := outbox.NewRelay(pool, js, outbox.RelayOptions{})
	job := reconcile.OutboxJob(pool, js, reconcile.OutboxOptions{LagMax: 1000, Consumers: []natsx.ConsumerSpec{present, missing}, Publish: relay.PublishPending})
	r, err := reconcile.NewRunner(pool, nil, job)
	require.NoError(t, err)

	rep, err := r.Run(ctx, reconcile.OutboxJobName, reconcile.Repair, "test")
	require.NoError(t, err)
	kinds := map[string]reconcile.Finding{}
	for _, f := range rep.Findings {
		kinds[f.Kind+"/"+f.IDs["consumer"]+f.IDs["subject"]] = f
	}
	assert.True(t, kinds["outbox_unpublished/"+events.SubjectStockReleased].Repaired, "%+v", rep.Findings)
	assert.Contains(t, kinds, "consumer_missing/"+missing.Durable)
	assert.Equal(t, int64(deadLetters), kinds["dead_letters/"+present.Durable].Values["messages"])
	assert.Equal(t, uint64(1), streamMsgs(t, admin, natsx.StreamStock), "the repair published stock.released")

	time.Sleep(200 * time.Millisecond) // the ordered consumer deletes its previous consumers in the background
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, refusals)
}
