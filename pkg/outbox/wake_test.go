package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/outbox"
)

// hourly is a poll interval no test outlives: what these tests see published was woken.
const hourly = time.Hour

func writeWaking(t *testing.T, e env, id string) {
	t.Helper()
	require.NoError(t, outbox.InTxBatch(context.Background(), e.pool, func(tx pgx.Tx, _ *pgx.Batch) error {
		return outbox.Write(context.Background(), tx, msg(id))
	}))
}

// A commit through InTxBatch wakes the relays of its process: its row is published long
// before the relay's next poll.
func TestACommitOfThisProcessWakesTheRelay(t *testing.T) {
	e := setup(t)
	runRelay(t, outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{PollInterval: hourly}))
	for i, id := range []string{"w1", "w2", "w3"} {
		writeWaking(t, e, id)
		require.Eventually(t, func() bool { return len(streamMsgs(t, e.js, "ORDER")) == i+1 }, 10*time.Second,
			10*time.Millisecond, "row %s was not published: the relay was not woken", id)
	}
	// The pass commits its cursor just after JetStream's acks.
	require.Eventually(t, func() bool { return pendingCount(t, e.pool) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the relay's pass did not commit")
}

// A relay woken while another holds the relays' lock (another replica mid-pass, which may
// have read before this commit and which nothing wakes for it) waits for its turn and then
// publishes, instead of leaving the row to the next poll.
func TestAWokenRelayWaitsForTheRelayPublishingThenPublishes(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	other, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	_, err = other.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, outbox.LockKey)
	require.NoError(t, err, "another relay's pass holds the lock")

	runRelay(t, outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{PollInterval: hourly}))
	writeWaking(t, e, "turn")
	require.Equal(t, 1, pendingCount(t, e.pool), "nothing is published while the other pass holds the lock")
	require.NoError(t, other.Rollback(ctx), "the other pass ends")
	require.Eventually(t, func() bool { return pendingCount(t, e.pool) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the woken relay left its row to the next poll")
}
