package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/telemetry"
)

func TestMain(m *testing.M) {
	otel.SetTextMapPropagator(telemetry.Propagator())
	os.Exit(m.Run())
}

type env struct {
	pool *pgxpool.Pool
	nc   *nats.Conn
	js   jetstream.JetStream
}

// setup gives the test its own migrated database (with a pool big enough for many concurrent
// transactions) and its own NATS server with every stream.
func setup(t *testing.T) env {
	t.Helper()
	ctx := context.Background()
	_, url := pgtest.New(t, outbox.Schema)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))
	return env{pool: pool, nc: nc, js: js}
}

func msg(id string) events.Message {
	return events.Message{ID: id, Subject: events.SubjectOrderCreated, Data: []byte(`{"id":"` + id + `"}`)}
}

func write(t *testing.T, db postgres.Beginner, msgs ...events.Message) {
	t.Helper()
	require.NoError(t, postgres.InTx(context.Background(), db, func(tx pgx.Tx) error {
		return outbox.Write(context.Background(), tx, msgs...)
	}))
}

// streamMsgs returns every message stored in stream, in stream order.
func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

func pendingCount(t *testing.T, pool *pgxpool.Pool) int {
	var n int
	assert.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_unpublished`).Scan(&n))
	return n
}

func publishedCount(t *testing.T, pool *pgxpool.Pool) int {
	var n int
	assert.NoError(t, pool.QueryRow(context.Background(), `
		SELECT count(*) FROM outbox o WHERE NOT EXISTS (SELECT 1 FROM outbox_unpublished u WHERE u.id = o.id)`).Scan(&n))
	return n
}

// publishAll runs passes until no row is pending and returns how many rows they published.
// A pass may publish nothing for a while: a transaction open in the test's database holds the
// relay's horizon back.
func publishAll(t *testing.T, r *outbox.Relay, pool *pgxpool.Pool) int {
	t.Helper()
	total := 0
	require.Eventually(t, func() bool {
		n, err := r.PublishPending(context.Background())
		total += n
		return assert.NoError(t, err) && pendingCount(t, pool) == 0
	}, 20*time.Second, 10*time.Millisecond, "rows still pending")
	return total
}

func TestWriteAddsTraceContextAndKeepsHeaders(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	tp := sdktrace.NewTracerProvider()
	defer func() { require.NoError(t, tp.Shutdown(ctx)) }()
	ctx, span := tp.Tracer("test").Start(ctx, "create order")
	defer span.End()

	m := msg("ev-1")
	m.Headers = map[string]string{"Stockflow-Extra": "x"}
	require.NoError(t, postgres.InTx(ctx, e.pool, func(tx pgx.Tx) error { return outbox.Write(ctx, tx, m) }))
	assert.Len(t, m.Headers, 1, "the caller's map is not modified")

	require.Equal(t, 1, publishAll(t, outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{}), e.pool))

	got := streamMsgs(t, e.js, natsx.StreamOrder)
	require.Len(t, got, 1)
	assert.Equal(t, events.SubjectOrderCreated, got[0].Subject)
	assert.Equal(t, m.Data, got[0].Data)
	assert.Equal(t, "ev-1", got[0].Header.Get(jetstream.MsgIDHeader))
	assert.Equal(t, "x", got[0].Header.Get("Stockflow-Extra"))
	sc := span.SpanContext()
	assert.Equal(t, fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()), got[0].Header.Get("traceparent"))
}

func TestWriteRejectsMessageWithoutID(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	err := postgres.InTx(ctx, e.pool, func(tx pgx.Tx) error {
		return outbox.Write(ctx, tx, msg("ok"), events.Message{Subject: "order.created"})
	})
	require.Error(t, err)
	assert.Zero(t, pendingCount(t, e.pool), "nothing stored")
}

func TestWriteSameEventTwiceIsPublishedOnce(t *testing.T) {
	e := setup(t)
	write(t, e.pool, msg("timeout:o-1"), msg("timeout:o-1"))
	write(t, e.pool, msg("timeout:o-1"))
	assert.Equal(t, 1, publishAll(t, outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{}), e.pool))
	assert.Len(t, streamMsgs(t, e.js, natsx.StreamOrder), 1)
}

func TestLongOpenTransactionHoldsBackLaterRows(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	relay := outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{})

	older, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = older.Rollback(ctx) }()
	require.NoError(t, outbox.Write(ctx, older, msg("older")))
	write(t, e.pool, msg("newer")) // commits while "older" is still open

	n, err := relay.PublishPending(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a row committed after a still-open transaction began must wait for it")

	require.NoError(t, older.Commit(ctx))
	assert.Equal(t, 2, publishAll(t, relay, e.pool))
	got := streamMsgs(t, e.js, natsx.StreamOrder)
	require.Len(t, got, 2)
	assert.Equal(t, "older", got[0].Header.Get(jetstream.MsgIDHeader))
	assert.Equal(t, "newer", got[1].Header.Get(jetstream.MsgIDHeader))
}

// TestOpenTransactionInAnotherDatabaseHoldsNothingBack: the relay waits only for transactions
// of its own database. A write transaction left open in another service's database on the same
// server (a psql session at BEGIN; INSERT …, a stuck batch) does not stop this one's events;
// one left open here still holds back the rows written after it.
func TestOpenTransactionInAnotherDatabaseHoldsNothingBack(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	other, _ := pgtest.New(t, outbox.Schema) // another service's database
	stuck, err := other.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = stuck.Rollback(ctx) }()
	require.NoError(t, outbox.Write(ctx, stuck, msg("elsewhere"))) // holds an xid, stays open

	write(t, e.pool, msg("here"))
	relay := outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{})
	n, err := relay.PublishPending(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "published while the other database's transaction is still open")

	mine, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = mine.Rollback(ctx) }()
	_, err = mine.Exec(ctx, `SELECT pg_current_xact_id()`) // an open transaction of this database
	require.NoError(t, err)
	write(t, e.pool, msg("after"))
	n, err = relay.PublishPending(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "this database's open transaction holds back the row written after it")
	require.NoError(t, mine.Rollback(ctx))
	assert.Equal(t, 1, publishAll(t, relay, e.pool))
}

// runRelay runs r until the test ends or the returned stop is called.
func runRelay(t *testing.T, r *outbox.Relay) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			assert.NoError(t, <-done, "relay run")
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestNotMissingMessages: many concurrent transactions, some rolled back, some held open
// long while later ones commit, with the relay running all along. Every committed row must be
// published exactly once, in txid order, and no rolled-back row ever.
func TestNotMissingMessages(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	stopRelay := runRelay(t, outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{BatchSize: 16, PollInterval: 10 * time.Millisecond}))

	const workers, txsPerWorker = 8, 30
	var mu sync.Mutex
	committed, rolledBack := map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 42))
			for i := range txsPerWorker {
				var ids []string
				for j := range 1 + rnd.IntN(3) {
					ids = append(ids, fmt.Sprintf("w%d-t%d-m%d", w, i, j))
				}
				rollback := rnd.IntN(4) == 0
				hold := time.Duration(0)
				if rnd.IntN(8) == 0 {
					hold = time.Duration(200+rnd.IntN(600)) * time.Millisecond
				}
				tx, err := e.pool.Begin(ctx)
				if !assert.NoError(t, err) {
					return
				}
				msgs := make([]events.Message, len(ids))
				for k, id := range ids {
					msgs[k] = msg(id)
				}
				assert.NoError(t, outbox.Write(ctx, tx, msgs...))
				time.Sleep(hold) // a slow transaction, open while others commit
				mu.Lock()
				if rollback {
					assert.NoError(t, tx.Rollback(ctx))
					for _, id := range ids {
						rolledBack[id] = true
					}
				} else {
					if assert.NoError(t, tx.Commit(ctx)) {
						for _, id := range ids {
							committed[id] = true
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NotEmpty(t, rolledBack)

	require.Eventually(t, func() bool {
		return publishedCount(t, e.pool) == len(committed)
	}, 30*time.Second, 20*time.Millisecond, "not every committed row was published")
	stopRelay()

	txids := map[string]uint64{}
	rows, err := e.pool.Query(ctx, `SELECT event_id, txid::text FROM outbox`)
	require.NoError(t, err)
	for rows.Next() {
		var id, txid string
		require.NoError(t, rows.Scan(&id, &txid))
		txids[id], err = strconv.ParseUint(txid, 10, 64)
		require.NoError(t, err)
	}
	require.NoError(t, rows.Err())

	got := streamMsgs(t, e.js, natsx.StreamOrder)
	seen := map[string]int{}
	var lastTxid uint64
	for _, m := range got {
		id := m.Header.Get(jetstream.MsgIDHeader)
		seen[id]++
		assert.False(t, rolledBack[id], "rolled-back %s published", id)
		assert.GreaterOrEqual(t, txids[id], lastTxid, "%s published out of txid order", id)
		lastTxid = txids[id]
	}
	assert.Len(t, got, len(committed), "stream holds exactly the committed messages")
	for id := range committed {
		assert.Equal(t, 1, seen[id], "committed %s published %d times", id, seen[id])
	}
}

// subscribeAll counts every publish on order.> as the server sees it, before JetStream
// deduplication, so double publishing is visible.
func subscribeAll(t *testing.T, nc *nats.Conn) func() map[string]int {
	var mu sync.Mutex
	counts := map[string]int{}
	sub, err := nc.Subscribe(natsx.SubjectsOrder, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		counts[m.Header.Get(jetstream.MsgIDHeader)]++
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	t.Cleanup(func() { assert.NoError(t, sub.Unsubscribe()) })
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(counts)
	}
}

func TestTwoRelaysPublishEachEventOnce(t *testing.T) {
	e := setup(t)
	// A separate connection, so the counting subscription does not share the relays' one.
	nc2, err := nats.Connect(e.nc.ConnectedUrl())
	require.NoError(t, err)
	t.Cleanup(nc2.Close)
	counts := subscribeAll(t, nc2)

	opts := outbox.RelayOptions{BatchSize: 8, PollInterval: 5 * time.Millisecond}
	stopA := runRelay(t, outbox.NewRelay(e.pool, e.js, opts))
	stopB := runRelay(t, outbox.NewRelay(e.pool, e.js, opts))

	const n = 400
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range n / 4 {
				write(t, e.pool, msg(fmt.Sprintf("w%d-%d", w, i)))
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return pendingCount(t, e.pool) == 0 }, 30*time.Second, 20*time.Millisecond)
	stopA()
	stopB()
	require.NoError(t, e.nc.Flush())

	got := streamMsgs(t, e.js, natsx.StreamOrder)
	assert.Len(t, got, n)
	ids := map[string]bool{}
	for _, m := range got {
		ids[m.Header.Get(jetstream.MsgIDHeader)] = true
	}
	assert.Len(t, ids, n, "each event id once in the stream")
	require.Eventually(t, func() bool { return len(counts()) == n }, 5*time.Second, 10*time.Millisecond)
	for id, c := range counts() {
		assert.Equal(t, 1, c, "%s was published %d times", id, c)
	}
}

func TestRelayKilledMidBatchThenRestartedPublishesEverything(t *testing.T) {
	e := setup(t)
	const n = 3000
	msgs := make([]events.Message, n)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("ev-%04d", i))
	}
	write(t, e.pool, msgs...)

	// Kill the relay as soon as the first message reaches the server.
	ctx, kill := context.WithCancel(context.Background())
	sub, err := e.nc.Subscribe(natsx.SubjectsOrder, func(*nats.Msg) { kill() })
	require.NoError(t, err)
	require.NoError(t, e.nc.Flush())
	killed := outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{BatchSize: 1000})
	require.Eventually(t, func() bool {
		_, err = killed.PublishPending(ctx)
		return err != nil
	}, 20*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, sub.Unsubscribe())
	t.Logf("after the kill: %d of %d rows still pending", pendingCount(t, e.pool), n)

	publishAll(t, outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{BatchSize: 1000}), e.pool)

	got := streamMsgs(t, e.js, natsx.StreamOrder)
	assert.Len(t, got, n, "republished rows were deduplicated")
	for i, m := range got {
		assert.Equal(t, fmt.Sprintf("ev-%04d", i), m.Header.Get(jetstream.MsgIDHeader), "stream order")
	}
}

// TestCleanupDeletesOldPublishedRowsOnly: of the rows written before Retention, the published
// one goes; the one JetStream refused (in outbox_retry) and the pending one stay, and so does
// every row written since.
func TestCleanupDeletesOldPublishedRowsOnly(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	relay := outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{Retention: 24 * time.Hour})
	refused := msg("refused")
	refused.Subject = "nowhere.refused"
	write(t, e.pool, msg("old"), refused)
	_, err := relay.PublishPending(ctx)
	require.Error(t, err, "the refused row")
	write(t, e.pool, msg("pending"))
	write(t, e.pool, msg("recent"))
	_, err = e.pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '2 days' WHERE event_id <> 'recent'`)
	require.NoError(t, err)

	n, err := relay.Cleanup(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	rows, err := e.pool.Query(ctx, `SELECT event_id FROM outbox ORDER BY id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"refused", "pending", "recent"}, left)
}

// TestCleanupCatchesUpABacklog: a backlog of old published rows larger than one statement
// deletes is gone after one Cleanup; younger and pending rows stay. The backlog's rows were
// marked published by a relay of a release before the cursor (migration 00003): they go too.
func TestCleanupCatchesUpABacklog(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	relay := outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{Retention: 24 * time.Hour})
	_, err := e.pool.Exec(ctx, `INSERT INTO outbox (event_id, subject, data, created_at, published_at)
		SELECT 'old-' || i, 'test.old', '{}', now() - interval '2 days', now() - interval '2 days'
		  FROM generate_series(1, 25000) AS i`)
	require.NoError(t, err)
	write(t, e.pool, msg("pending"))
	_, err = e.pool.Exec(ctx, `INSERT INTO outbox (event_id, subject, data, published_at) VALUES ('recent', 'test.recent', '{}', now())`)
	require.NoError(t, err)

	n, err := relay.Cleanup(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 25000, n)
	rows, err := e.pool.Query(ctx, `SELECT event_id FROM outbox ORDER BY id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"pending", "recent"}, left)
}

// TestWriteRefusesAMessageTooLargeToPublish (review F17): a message the server would refuse
// could never be published and would hold back every row after it; it fails the write
// instead, and nothing is stored. One at the limit is published.
func TestWriteRefusesAMessageTooLargeToPublish(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	big := msg("big")
	big.Data = bytes.Repeat([]byte("x"), outbox.MaxMessageBytes)
	err := postgres.InTx(ctx, e.pool, func(tx pgx.Tx) error { return outbox.Write(ctx, tx, msg("ok"), big) })
	require.ErrorIs(t, err, outbox.ErrTooLarge)
	assert.Zero(t, pendingCount(t, e.pool), "nothing stored")

	big.Data = big.Data[:outbox.MaxMessageBytes-len(`{"traceparent":""}`)-100]
	write(t, e.pool, big)
	require.Equal(t, 1, publishAll(t, outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{}), e.pool))
}

// TestARowThatCannotBePublishedDoesNotHoldBackTheOthers (review F17): a row JetStream refuses
// every time (here a subject no stream takes) used to end every pass in an error, so
// PublishPending stopped at the first batch and Run backed off towards MaxBackoff: with a
// backlog, the service's whole event flow slowed to a batch per 5 s. Now a pass that
// published something is progress: the backlog drains in one call while that row stays
// pending, and its error is still returned.
func TestARowThatCannotBePublishedDoesNotHoldBackTheOthers(t *testing.T) {
	e := setup(t)
	stray := msg("stray")
	stray.Subject = "nowhere.stray"
	msgs := []events.Message{stray}
	for i := range 50 {
		msgs = append(msgs, msg(fmt.Sprintf("ok-%d", i)))
	}
	write(t, e.pool, msgs...)

	r := outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{BatchSize: 8})
	n, err := r.PublishPending(context.Background())
	require.Error(t, err, "the stray row's failure is reported")
	assert.Equal(t, 50, n, "every other row is published in the same call")
	assert.Equal(t, 1, pendingCount(t, e.pool), "the stray row stays pending, retried on every pass")
	assert.Len(t, streamMsgs(t, e.js, natsx.StreamOrder), 50)

	// Once a stream takes it, the next pass publishes it, and nothing is retried after that.
	_, err = e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "NOWHERE", Subjects: []string{"nowhere.>"}})
	require.NoError(t, err)
	n, err = r.PublishPending(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Zero(t, pendingCount(t, e.pool))
	assert.Len(t, streamMsgs(t, e.js, "NOWHERE"), 1)
	n, err = r.PublishPending(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n, "published once")
}

// statements records the SQL of every statement a pool sends, alone or in a batch.
type statements struct {
	mu   sync.Mutex
	sqls []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sqls = append(s.sqls, d.SQL)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sqls = append(s.sqls, d.SQL)
}

func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sqls
	s.sqls = nil
	return out
}

// TestAPollWithNothingToPublishIsOneStatement: at rest every poll finds nothing; it asks once,
// outside a transaction, and opens none. With a row waiting, the pass runs.
func TestAPollWithNothingToPublishIsOneStatement(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	_, url := pgtest.New(t, outbox.Schema)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	seen := &statements{}
	cfg.ConnConfig.Tracer = seen
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	r := outbox.NewRelay(pool, e.js, outbox.RelayOptions{})

	seen.take()
	n, err := r.PublishPending(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	sqls := seen.take()
	require.Len(t, sqls, 1, "one statement: %q", sqls)
	assert.Contains(t, sqls[0], "outbox_unpublished")

	write(t, pool, msg("one"))
	seen.take()
	n, err = r.PublishPending(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	sqls = seen.take()
	assert.Contains(t, sqls, "begin", "a pass, in a transaction: %q", sqls)
}

// TestTheCursorFollowsTransactionIDsAsNumbers: rows whose transaction ids cross a power of ten
// (9, 10, 11, …, 101) are published once each, in that order, in batches of two — as text,
// "10" < "9", and a cursor moved past "11" would leave 9 behind for good.
func TestTheCursorFollowsTransactionIDsAsNumbers(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	txids := []int{101, 9, 100, 11, 10, 99}
	for _, x := range txids {
		_, err := e.pool.Exec(ctx, `INSERT INTO outbox (event_id, subject, data, txid) VALUES ($1, $2, '{}', $3::text::xid8)`,
			fmt.Sprintf("tx-%d", x), events.SubjectOrderCreated, strconv.Itoa(x))
		require.NoError(t, err)
	}
	r := outbox.NewRelay(e.pool, e.js, outbox.RelayOptions{BatchSize: 2})
	assert.Equal(t, len(txids), publishAll(t, r, e.pool))
	var ids []string
	for _, m := range streamMsgs(t, e.js, natsx.StreamOrder) {
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	assert.Equal(t, []string{"tx-9", "tx-10", "tx-11", "tx-99", "tx-100", "tx-101"}, ids)
}

// TestRowsMarkedByAnEarlierRelayAreNotPublishedAgain: the database of a release before the
// relay's cursor (outbox migrations 1 and 2), its relay having marked one row published and not
// yet the other; after migration 3 the relay publishes only the other. Rows written after
// the migration follow it.
func TestRowsMarkedByAnEarlierRelayAreNotPublishedAgain(t *testing.T) {
	ctx := context.Background()
	before := fstest.MapFS{}
	for _, name := range []string{"00001_outbox.sql", "00002_no_notify.sql"} {
		b, err := fs.ReadFile(outbox.Schema.FS, name)
		require.NoError(t, err)
		before[name] = &fstest.MapFile{Data: b}
	}
	pool, _ := pgtest.New(t, postgres.Schema{Name: outbox.Schema.Name, FS: before})
	e := setup(t)
	write(t, pool, msg("marked"), msg("pending"))
	_, err := pool.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE event_id = 'marked'`)
	require.NoError(t, err)

	require.NoError(t, postgres.Migrate(ctx, pool, outbox.Schema))
	write(t, pool, msg("after"))
	r := outbox.NewRelay(pool, e.js, outbox.RelayOptions{})
	assert.Equal(t, 2, publishAll(t, r, pool))
	var ids []string
	for _, m := range streamMsgs(t, e.js, natsx.StreamOrder) {
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	assert.Equal(t, []string{"pending", "after"}, ids)
}
