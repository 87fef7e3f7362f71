package natsx_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
)

// connectCluster connects to url as the services do, and applies every stream with 3 replicas.
func connectCluster(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, js, err := natsx.Connect(context.Background(), url, t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(context.Background(), js, 3))
	return js
}

func TestApplyStreamsReplicatesEveryStreamAndStartingNeverShrinksThem(t *testing.T) {
	ctx := context.Background()
	c := natstest.StartCluster(t, 3)
	js := connectCluster(t, c.URLs())

	for _, want := range natsx.StreamConfigs(3) {
		s, err := js.Stream(ctx, want.Name)
		require.NoError(t, err)
		info := s.CachedInfo()
		assert.Equal(t, 3, info.Config.Replicas, want.Name)
		if assert.NotNil(t, info.Cluster, want.Name) {
			assert.NotEmpty(t, info.Cluster.Leader, want.Name)
			assert.Len(t, info.Cluster.Replicas, 2, "%s: a copy on each of the other two nodes", want.Name)
		}
	}
	drifts, err := natsx.CheckStreams(ctx, js, 3)
	require.NoError(t, err)
	assert.Empty(t, drifts)

	drifts, err = natsx.CheckStreams(ctx, js, 1)
	require.NoError(t, err, "other replicas than configured is a drift, not a blocker")
	assert.Len(t, drifts, len(natsx.StreamConfigs(1)))
	for _, d := range drifts {
		assert.Contains(t, d, "replicas (3, configured 1)")
	}

	drifts, err = natsx.CreateStreams(ctx, js, 1)
	require.NoError(t, err, "a service started with NATS_STREAM_REPLICAS=1")
	assert.Len(t, drifts, len(natsx.StreamConfigs(1)), "it reports the replicas it did not change")
	drifts, err = natsx.CheckStreams(ctx, js, 3)
	require.NoError(t, err)
	assert.Empty(t, drifts, "CreateStreams changed no existing stream")
}

// TestLosingTheOrderLeaderLosesNoAcknowledgedMessage kills the node leading ORDER between
// publishes, brings it back, makes it the leader again and reads the stream from its copy.
func TestLosingTheOrderLeaderLosesNoAcknowledgedMessage(t *testing.T) {
	ctx := context.Background()
	c := natstest.StartCluster(t, 3)
	js := connectCluster(t, c.URLs())
	leader := c.StreamLeader(natsx.StreamOrder)
	require.NotEqual(t, -1, leader, "ORDER has a leader")

	// The consumer connects through the node about to die: its connection must move too.
	cjs := connectCluster(t, c.URL(leader))
	var mu sync.Mutex
	received := map[string]int{}
	stop, err := natsx.Consume(ctx, cjs, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "failover"},
		func(_ context.Context, m jetstream.Msg) error {
			mu.Lock()
			defer mu.Unlock()
			received[m.Headers().Get(jetstream.MsgIDHeader)]++
			return nil
		}, testLogger(t))
	require.NoError(t, err)
	defer stop()

	var acked []string
	// publish returns once JetStream acknowledged id, retrying what fails during an election;
	// a retry of a message stored without its ack reaching us is deduplicated by its Msg-Id.
	publish := func(id string) {
		t.Helper()
		require.Eventually(t, func() bool {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := js.Publish(pctx, events.SubjectOrderCreated, []byte(id), jetstream.WithMsgID(id))
			if err != nil {
				t.Logf("publish %s: %v; retrying", id, err)
			}
			return err == nil
		}, 30*time.Second, 100*time.Millisecond, "publish %s", id)
		acked = append(acked, id)
	}
	for i := range 50 {
		publish(fmt.Sprintf("before-%d", i))
	}
	c.Shutdown(leader)
	for i := range 50 {
		publish(fmt.Sprintf("during-%d", i))
	}
	next := c.StreamLeader(natsx.StreamOrder)
	assert.True(t, next >= 0 && next != leader, "another node took over ORDER from node %d (now %d)", leader, next)
	c.Restart(leader)
	for i := range 10 {
		publish(fmt.Sprintf("after-%d", i))
	}

	c.MoveStreamLeader(natsx.StreamOrder, leader)
	stored := map[string]int{}
	s, err := js.Stream(ctx, natsx.StreamOrder)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		stored[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	assert.Len(t, stored, len(acked), "the old leader's copy holds exactly the acknowledged messages")
	for _, id := range acked {
		assert.Equal(t, 1, stored[id], "%s stored %d times", id, stored[id])
	}

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received) == len(acked)
	}, 60*time.Second, 50*time.Millisecond, "the durable consumer received every message")
	mu.Lock()
	got := maps.Clone(received)
	mu.Unlock()
	for _, id := range acked {
		assert.Positive(t, got[id], "%s never delivered", id)
	}
}
