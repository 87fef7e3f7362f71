package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

func outboxSetup(t *testing.T, consumers []natsx.ConsumerSpec, lagMax int) (*reconcile.Runner, *pgxpool.Pool, jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	pool, _ := pgtest.New(t, outbox.Schema, reconcile.Schema)
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), "test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))
	relay := outbox.NewRelay(pool, js, outbox.RelayOptions{})
	job := reconcile.OutboxJob(pool, js, reconcile.OutboxOptions{Age: 0, LagMax: lagMax, Consumers: consumers, Publish: relay.PublishPending})
	r, err := reconcile.NewRunner(pool, nil, job)
	require.NoError(t, err)
	return r, pool, js
}

// The relay is stopped (never started) with rows in the outbox: check finds exactly those
// rows, repair publishes them, a second run finds nothing.
func TestOutboxJobRepublishesStuckRows(t *testing.T) {
	ctx := context.Background()
	r, pool, js := outboxSetup(t, nil, 1000)
	var ids []string
	require.NoError(t, postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		var msgs []events.Message
		for i := range 3 {
			m, err := events.Encode(events.StockReleased{OrderID: fmt.Sprintf("o-%d", i), Reason: events.ReleaseTimeout}, time.Now())
			require.NoError(t, err)
			msgs, ids = append(msgs, m), append(ids, m.ID)
		}
		return outbox.Write(ctx, tx, msgs...)
	}))
	time.Sleep(10 * time.Millisecond) // Age 0: rows written before the run

	check, err := r.Run(ctx, reconcile.OutboxJobName, reconcile.Check, "test")
	require.NoError(t, err)
	require.Equal(t, 3, check.Found)
	var found []string
	for _, f := range check.Findings {
		assert.Equal(t, "outbox_unpublished", f.Kind)
		assert.False(t, f.Repaired)
		found = append(found, f.IDs["event_id"])
	}
	assert.ElementsMatch(t, ids, found)
	assert.Equal(t, uint64(0), streamMsgs(t, js, natsx.StreamStock), "check mode publishes nothing")

	repair, err := r.Run(ctx, reconcile.OutboxJobName, reconcile.Repair, "test")
	require.NoError(t, err)
	assert.Equal(t, 3, repair.Found)
	assert.Equal(t, 3, repair.Repaired)
	assert.Equal(t, uint64(3), streamMsgs(t, js, natsx.StreamStock))

	again, err := r.Run(ctx, reconcile.OutboxJobName, reconcile.Check, "test")
	require.NoError(t, err)
	assert.Zero(t, again.Found, "%+v", again.Findings)
}

// A consumer far behind, a missing consumer and dead letters are reported, not repaired.
func TestOutboxJobReportsLagAndDeadLetters(t *testing.T) {
	ctx := context.Background()
	lagging := natsx.ConsumerSpec{Stream: natsx.StreamStock, Durable: "test-lagging", FilterSubjects: []string{"stock.>"}}
	missing := natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "test-missing"}
	r, _, js := outboxSetup(t, []natsx.ConsumerSpec{lagging, missing}, 2)
	_, err := js.CreateOrUpdateConsumer(ctx, lagging.Stream, jetstream.ConsumerConfig{Durable: lagging.Durable, AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	for i := range 5 {
		_, err := js.Publish(ctx, events.SubjectStockReleased, fmt.Appendf(nil, `{"n":%d}`, i))
		require.NoError(t, err)
	}
	for _, durable := range []string{lagging.Durable, lagging.Durable, "another-service-consumer"} {
		m := nats.NewMsg(natsx.SubjectDeadLetterPrefix + events.SubjectStockReleased)
		m.Header.Set(natsx.HeaderDLConsumer, durable)
		m.Data = []byte(`{}`)
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	adv := nats.NewMsg("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + lagging.Stream + "." + lagging.Durable)
	adv.Data = []byte(`{}`)
	_, err = js.PublishMsg(ctx, adv)
	require.NoError(t, err)

	for _, mode := range []reconcile.Mode{reconcile.Check, reconcile.Repair} {
		rep, err := r.Run(ctx, reconcile.OutboxJobName, mode, "test")
		require.NoError(t, err)
		kinds := map[string]reconcile.Finding{}
		for _, f := range rep.Findings {
			kinds[f.Kind+"/"+f.IDs["consumer"]] = f
			assert.False(t, f.Repaired)
		}
		assert.Len(t, rep.Findings, 3, "%+v", rep.Findings)
		assert.Equal(t, int64(5), kinds["consumer_lag/test-lagging"].Values["num_pending"])
		assert.Contains(t, kinds, "consumer_missing/test-missing")
		assert.Equal(t, int64(3), kinds["dead_letters/test-lagging"].Values["messages"], "two copies and one advisory")
	}
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}
