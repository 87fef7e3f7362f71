package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// TestRelayLosesNothingWhenTheStreamLeaderDies runs the relay against a 3-replica ORDER
// stream on a 3-node cluster while rows are written, kills the node leading ORDER mid-run
// (publishes in flight to it fail or time out, the relay retries them), writes on through the
// election, restarts the node and writes more. Every row must end up published, and the
// restarted node's copy of the stream must hold each event exactly once.
func TestRelayLosesNothingWhenTheStreamLeaderDies(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, outbox.Schema)
	c := natstest.StartCluster(t, 3)
	nc, js, err := natsx.Connect(ctx, c.URLs(), t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 3))
	leader := c.StreamLeader(natsx.StreamOrder)
	require.NotEqual(t, -1, leader, "ORDER has a leader")

	stopRelay := runRelay(t, outbox.NewRelay(pool, js, outbox.RelayOptions{
		BatchSize: 32, PollInterval: 10 * time.Millisecond, MaxBackoff: time.Second,
	}))
	const batches, perBatch = 50, 10
	for b := range batches {
		switch b {
		case batches / 3:
			t.Logf("killing node %d with %d rows pending", leader, pendingCount(t, pool))
			c.Shutdown(leader)
		case 2 * batches / 3:
			t.Logf("restarting node %d with %d rows pending", leader, pendingCount(t, pool))
			c.Restart(leader)
		}
		msgs := make([]events.Message, perBatch)
		for i := range msgs {
			msgs[i] = msg(fmt.Sprintf("ev-%02d-%d", b, i))
		}
		write(t, pool, msgs...)
		time.Sleep(10 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return pendingCount(t, pool) == 0 }, 30*time.Second, 20*time.Millisecond,
		"every row published")
	stopRelay()

	assert.Equal(t, batches*perBatch, publishedCount(t, pool))

	c.MoveStreamLeader(natsx.StreamOrder, leader)
	seen := map[string]int{}
	for _, m := range streamMsgs(t, js, natsx.StreamOrder) {
		seen[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	assert.Len(t, seen, batches*perBatch, "every event is in the stream")
	for b := range batches {
		for i := range perBatch {
			id := fmt.Sprintf("ev-%02d-%d", b, i)
			assert.Equal(t, 1, seen[id], "%s is in the stream %d times", id, seen[id])
		}
	}
}
