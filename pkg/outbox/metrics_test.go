package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/telemetry/metricstest"
)

// relayLockKey is the advisory lock relays take turns on (outbox.lockKey): holding it makes the
// running relay a follower, as when another replica is publishing.
const relayLockKey int64 = 0x6f7574626f78

// TestOutboxBacklogGaugesRiseAndFallToZero: while rows wait (another "replica" holds the relay
// lock) /metrics shows them and the age of the oldest; once the relay publishes, both are 0.
func TestOutboxBacklogGaugesRiseAndFallToZero(t *testing.T) {
	metricstest.Handler(t)
	ctx := context.Background()
	e := setup(t)
	leader, err := e.pool.Acquire(ctx)
	require.NoError(t, err)
	defer leader.Release()
	_, err = leader.Exec(ctx, `SELECT pg_advisory_lock($1)`, relayLockKey)
	require.NoError(t, err)

	runRelay(t, outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{PollInterval: 10 * time.Millisecond}))
	var s metricstest.Scrape
	require.Eventually(t, func() bool { // the gauges exist once Run has started
		s = metricstest.Get(t)
		return s.Type("stockflow_outbox_backlog") == "GAUGE" && s.Type("stockflow_outbox_oldest_age_seconds") == "GAUGE"
	}, 10*time.Second, 10*time.Millisecond, "the relay's gauges:\n%s", s.Text)
	assert.Equal(t, 0.0, s.Value("stockflow_outbox_backlog", nil), "nothing pending yet:\n%s", s.Text)

	write(t, e.pool, msg("m-1"), msg("m-2"))
	write(t, e.pool, msg("m-3"))
	time.Sleep(50 * time.Millisecond) // the oldest row ages; the relay cannot publish it
	s = metricstest.Get(t)
	assert.Equal(t, 3.0, s.Value("stockflow_outbox_backlog", nil))
	assert.Greater(t, s.Value("stockflow_outbox_oldest_age_seconds", nil), 0.04)

	_, err = leader.Exec(ctx, `SELECT pg_advisory_unlock($1)`, relayLockKey)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s = metricstest.Get(t)
		return s.Value("stockflow_outbox_backlog", nil) == 0
	}, 20*time.Second, 20*time.Millisecond, "the relay publishes the backlog")
	assert.Equal(t, 0.0, s.Value("stockflow_outbox_oldest_age_seconds", nil), "no pending row, no age")
	assert.Len(t, streamMsgs(t, e.js, natsx.StreamOrder), 3)
}

// TestInboxDuplicatesAreCountedOncePerDuplicate: a message claimed before counts once per
// duplicate delivery, under its consumer; a batch that fails counts nothing (it is retried).
func TestInboxDuplicatesAreCountedOncePerDuplicate(t *testing.T) {
	metricstest.Handler(t)
	ctx := context.Background()
	d := newBatchDB(t)
	consumer := metricstest.Labels{"consumer": "dup-test"}
	count := func() float64 { return metricstest.Get(t).Value("stockflow_inbox_duplicates_total", consumer) }
	before := count()
	in := &inbox.Message{Consumer: "dup-test", ID: "m-1"}
	emit := func(pgx.Tx) ([]events.Message, error) { return nil, nil }

	dup, err := outbox.InTx(ctx, d.pool, in, emit)
	require.NoError(t, err)
	require.False(t, dup)
	assert.Equal(t, before, count(), "the first delivery is no duplicate")

	dup, err = outbox.InTx(ctx, d.pool, in, emit)
	require.NoError(t, err)
	require.True(t, dup)
	assert.Equal(t, before+1, count(), "a redelivery")

	// A batch holding m-1 again and m-2 twice: two more duplicates.
	units := []*outbox.Unit{
		{In: &inbox.Message{Consumer: "dup-test", ID: "m-1"}},
		{In: &inbox.Message{Consumer: "dup-test", ID: "m-2"}},
		{In: &inbox.Message{Consumer: "dup-test", ID: "m-2"}},
	}
	var ran []int
	require.NoError(t, outbox.Batch(ctx, d.pool, units, emitOrFail(units, &ran)))
	assert.Equal(t, before+3, count())

	boom := errors.New("boom")
	_, err = outbox.InTx(ctx, d.pool, in, func(pgx.Tx) ([]events.Message, error) { return nil, boom })
	require.NoError(t, err, "a duplicate does not run fn")
	assert.Equal(t, before+4, count())
	failing := []*outbox.Unit{{In: &inbox.Message{Consumer: "dup-test", ID: "m-1"}}, {In: &inbox.Message{Consumer: "dup-test", ID: "m-3"}}}
	err = outbox.Batch(ctx, d.pool, failing, func(pgx.Tx, *pgx.Batch, []int) error { return boom })
	require.ErrorIs(t, err, boom)
	assert.Equal(t, before+4, count(), "a rolled-back batch is retried, its duplicate counted then")
}
