package natsx_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/telemetry/metricstest"
)

var errTransient = errors.New("database unavailable")

// TestDeadLettersAndRedeliveriesAreCountedPerConsumer: a poison message counts as terminated
// with reason poison; a message failing until its last delivery with reason max_deliveries,
// and its second delivery as a redelivery; a message retried once and then done is one
// redelivery and no dead letter.
func TestDeadLettersAndRedeliveriesAreCountedPerConsumer(t *testing.T) {
	metricstest.Handler(t)
	tests := []struct {
		name           string
		handle         func(numDelivered uint64) error
		maxDeliver     int
		terminated     string // the reason label, "" for none
		redeliveries   float64
		wantDeliveries int
	}{
		{name: "poison", handle: func(uint64) error { return natsx.Permanent(errors.New("negative total")) },
			terminated: "poison", wantDeliveries: 1},
		{name: "out of deliveries", handle: func(uint64) error { return errTransient }, maxDeliver: 2,
			terminated: "max_deliveries", redeliveries: 1, wantDeliveries: 2},
		{name: "retried then done", handle: func(n uint64) error {
			if n == 1 {
				return errTransient
			}
			return nil
		}, redeliveries: 1, wantDeliveries: 2},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			js := setup(t)
			durable := fmt.Sprintf("metrics-c%d", i)
			consumer := metricstest.Labels{"consumer": durable}
			ack, err := js.Publish(ctx, events.SubjectOrderCreated, []byte(`{"id":"x"}`), jetstream.WithMsgID(durable))
			require.NoError(t, err)
			before := metricstest.Get(t)
			require.Zero(t, before.Value("stockflow_messaging_terminated_total", consumer))

			var seen counter
			stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: durable, MaxDeliver: tc.maxDeliver},
				func(ctx context.Context, msg jetstream.Msg) error { return tc.handle(seen.add(msg)) }, testLogger(t))
			require.NoError(t, err)
			defer stop()
			require.Eventually(t, consumerSettled(t, js, durable, ack.Sequence), 10*time.Second, 20*time.Millisecond)
			stop()
			require.Equal(t, tc.wantDeliveries, seen.n())

			after := metricstest.Get(t)
			if tc.terminated == "" {
				assert.Zero(t, after.Value("stockflow_messaging_terminated_total", consumer), "no dead letter")
			} else {
				assert.Equal(t, "COUNTER", after.Type("stockflow_messaging_terminated_total"))
				assert.Equal(t, 1.0, after.Value("stockflow_messaging_terminated_total",
					metricstest.Labels{"consumer": durable, "reason": tc.terminated}), "%v", after.Series("stockflow_messaging_terminated_total"))
			}
			assert.Equal(t, tc.redeliveries, after.Value("stockflow_messaging_redeliveries_total", consumer))
		})
	}
}

// TestConsumerLagIsTheConsumersNumPending: with one message in flight and four behind it the
// gauge shows 4; once everything is handled it shows 0; a stopped consumer is not reported.
func TestConsumerLagIsTheConsumersNumPending(t *testing.T) {
	metricstest.Handler(t)
	defer natsx.SetLagRefresh(0)()
	ctx := context.Background()
	js := setup(t)
	for i := range 5 {
		_, err := js.Publish(ctx, events.SubjectOrderCreated, []byte(`{}`), jetstream.WithMsgID(fmt.Sprint("lag-", i)))
		require.NoError(t, err)
	}
	release := make(chan struct{})
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "lagging", MaxAckPending: 1},
		func(ctx context.Context, _ jetstream.Msg) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}, testLogger(t))
	require.NoError(t, err)
	defer stop()
	lag := metricstest.Labels{"stream": natsx.StreamOrder, "consumer": "lagging"}

	var s metricstest.Scrape
	require.Eventually(t, func() bool {
		s = metricstest.Get(t)
		return s.Has("stockflow_messaging_consumer_lag", lag) && s.Value("stockflow_messaging_consumer_lag", lag) == 4
	}, 10*time.Second, 20*time.Millisecond, "one delivered, four pending")
	assert.Equal(t, "GAUGE", s.Type("stockflow_messaging_consumer_lag"))
	close(release)
	require.Eventually(t, func() bool {
		return metricstest.Get(t).Value("stockflow_messaging_consumer_lag", lag) == 0
	}, 10*time.Second, 20*time.Millisecond, "caught up")
	stop()
	assert.False(t, metricstest.Get(t).Has("stockflow_messaging_consumer_lag", lag), "a stopped consumer is not reported")
}

// TestConsumerLagIsCached: scrapes within the refresh interval do not ask the server again,
// so the figure stays what the first fetch saw while the consumer falls behind.
func TestConsumerLagIsCached(t *testing.T) {
	metricstest.Handler(t)
	defer natsx.SetLagRefresh(time.Hour)()
	ctx := context.Background()
	js := setup(t)
	release := make(chan struct{})
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "cached", MaxAckPending: 1},
		func(context.Context, jetstream.Msg) error { <-release; return nil }, testLogger(t))
	require.NoError(t, err)
	defer stop()
	defer close(release) // before stop, which waits for the handler
	lag := metricstest.Labels{"consumer": "cached"}
	require.True(t, metricstest.Get(t).Has("stockflow_messaging_consumer_lag", lag))
	assert.Equal(t, 0.0, metricstest.Get(t).Value("stockflow_messaging_consumer_lag", lag))

	for i := range 3 {
		_, err := js.Publish(ctx, events.SubjectOrderCreated, []byte(`{}`), jetstream.WithMsgID(fmt.Sprint("cached-", i)))
		require.NoError(t, err)
	}
	c, err := js.Consumer(ctx, natsx.StreamOrder, "cached")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 2
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, 0.0, metricstest.Get(t).Value("stockflow_messaging_consumer_lag", lag), "no new fetch within the interval")
}
