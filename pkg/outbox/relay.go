package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockflow/stockflow/pkg/postgres"
)

// RelayOptions configures a Relay. Zero values take the documented defaults.
type RelayOptions struct {
	// BatchSize is the most rows one pass publishes before marking them. Default 256.
	BatchSize int
	// PollInterval is how long the relay waits between passes when no commit of this process
	// wakes it (InTxBatch): the latency of rows other processes write, and the retry interval
	// while a long-open transaction holds rows back. Default 50ms.
	PollInterval time.Duration
	// MaxBackoff caps the wait after consecutive failed passes (the wait doubles from
	// PollInterval). Default 5s.
	MaxBackoff time.Duration
	// Retention is how long published rows are kept after they were written (for audit and
	// replay) before Run deletes them. Default 7 days; negative keeps them forever.
	Retention time.Duration
	// PassTimeout bounds one pass (read, publish, move the cursor, commit). A pass stuck on a
	// database connection that will never answer fails and the next one starts on a fresh
	// connection, instead of stopping the relay. Default 30s.
	PassTimeout time.Duration
	// Logger receives failures and cleanup results. Default slog.Default().
	Logger *slog.Logger
}

// Relay publishes committed outbox rows to JetStream. Run one per service replica: replicas
// take turns through an advisory lock, so they never publish the same row concurrently.
type Relay struct {
	pool *pgxpool.Pool
	js   jetstream.JetStream
	opts RelayOptions
	log  *slog.Logger
}

// NewRelay returns a relay reading the outbox table of pool and publishing with js.
func NewRelay(pool *pgxpool.Pool, js jetstream.JetStream, opts RelayOptions) *Relay {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 50 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Retention == 0 {
		opts.Retention = 7 * 24 * time.Hour
	}
	if opts.PassTimeout <= 0 {
		opts.PassTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Relay{pool: pool, js: js, opts: opts, log: opts.Logger.With("component", "outbox-relay")}
}

// cleanupEvery is how often Run deletes published rows past Retention.
const cleanupEvery = time.Minute

// Run publishes pending rows until ctx is done, then returns nil. It wakes when a transaction
// of this process that wrote outbox rows commits (InTxBatch) and every PollInterval, backs off
// (up to MaxBackoff) while passes fail and publish nothing, and beside that deletes published
// rows past Retention once a minute (Cleanup: a backlog of them never holds back publishing). Failures are logged, never
// fatal: the rows stay pending and are retried. Stopping Run at any point (even mid-batch) is safe.
// While it runs, the gauges stockflow.outbox.backlog and stockflow.outbox.oldest_age report
// the pending rows (an error registering them is Run's only error).
func (r *Relay) Run(ctx context.Context) error {
	unobserve, err := r.observeBacklog()
	if err != nil {
		return err
	}
	defer unobserve()
	if r.opts.Retention > 0 {
		var cleaner sync.WaitGroup
		cleaner.Go(func() { r.cleanUp(ctx) })
		defer cleaner.Wait()
	}
	woken := wakes.add()
	defer wakes.remove(woken)
	backoff := r.opts.PollInterval
	var logged time.Time // when a failure was last logged
	ownRows := false     // woken by a commit of this process
	for {
		n, err := r.publishPending(ctx, ownRows)
		if ctx.Err() != nil {
			return nil
		}
		wait := r.opts.PollInterval
		switch {
		case err != nil && n == 0:
			r.log.ErrorContext(ctx, "publish outbox", "err", err, "retry_in", backoff)
			wait, backoff, logged = backoff, min(2*backoff, r.opts.MaxBackoff), time.Now()
		case err != nil:
			// Progress: the rows that failed stay pending and are tried again on the next
			// pass, without holding back the others behind a backoff. Logged at most once
			// per MaxBackoff while it lasts.
			if time.Since(logged) >= r.opts.MaxBackoff {
				r.log.ErrorContext(ctx, "publish outbox: rows failed, the others were published", "err", err, "published", n)
				logged = time.Now()
			}
			backoff = r.opts.PollInterval
		default:
			backoff = r.opts.PollInterval
		}
		t := time.NewTimer(wait)
		select {
		case <-woken:
			ownRows = true
		case <-t.C:
			ownRows = false
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// PublishPending publishes every row that is committed and eligible now (see the package
// documentation), batch by batch, and returns how many it published. It returns 0 at once
// when another relay is publishing. On error, the rows of the failed batch that JetStream
// acknowledged are published for good, and the others stay pending (those it refused in
// outbox_retry, read first on every pass). A batch that published some of its rows is
// progress: the next batch follows, so a row JetStream refuses every time does not hold back
// the rows behind it (review F17); the first error is returned at the end.
func (r *Relay) PublishPending(ctx context.Context) (int, error) {
	return r.publishPending(ctx, false)
}

// publishPending is PublishPending; with waitTurn it waits for the relay publishing, if any,
// to finish its pass instead of returning: the caller was woken by its own process's commit,
// whose rows that relay's pass may have read too early to see, and which no commit of that
// relay's process will wake it for.
func (r *Relay) publishPending(ctx context.Context, waitTurn bool) (int, error) {
	if !waitTurn {
		if idle, err := r.idle(ctx); err != nil || idle {
			return 0, err
		}
	}
	total := 0
	var firstErr error
	for {
		pctx, cancel := context.WithTimeout(ctx, r.opts.PassTimeout)
		read, n, err := r.pass(pctx, waitTurn)
		cancel()
		total += n
		if errors.Is(err, errNotLeader) {
			return total, firstErr
		}
		if firstErr == nil {
			firstErr = err
		}
		if read < r.opts.BatchSize || n == 0 {
			return total, firstErr
		}
	}
}

// idle reports that no row waits to be published, in one statement outside a transaction: a
// poll that finds nothing, the usual one at rest, costs a round trip instead of a pass's four
// (begin, lock, read, rollback). A row it misses by a moment is the next poll's or wake's.
func (r *Relay) idle(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.PassTimeout)
	defer cancel()
	var waiting bool
	if err := r.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox_unpublished)`).Scan(&waiting); err != nil {
		return false, fmt.Errorf("outbox pass: look for rows: %w", err)
	}
	return !waiting, nil
}

// lockKey is the advisory lock the relays of one database take turns on.
const lockKey int64 = 0x6f7574626f78 // "outbox"

type row struct {
	id      int64
	txid    string // xid8, as text
	retry   bool   // in outbox_retry: at or below the cursor, refused before
	eventID string
	subject string
	data    []byte
	headers map[string]string
}

// pass publishes one batch in one transaction: lock, read, publish and wait for the acks,
// move the cursor past the rows it tried (the refused ones into outbox_retry, the retried
// ones that went out out of it), commit. Nothing moves until the commit, so a crash anywhere
// leaves the rows to be published again. The advisory lock, held until the commit, is what
// keeps another relay off them: the rows themselves are neither locked nor updated (a mark
// per row was an update that could not be HOT, and a FOR UPDATE a lock record per row).
func (r *Relay) pass(ctx context.Context, waitTurn bool) (read, n int, err error) {
	var rows []row
	var acked []bool
	var pubErr error
	// The BEGIN goes with the lock, the cursor's move with the COMMIT: three round trips.
	err = postgres.InTxBatch(ctx, r.pool, func(tx pgx.Tx, last *pgx.Batch) error {
		cur, err := lockAndPlace(ctx, tx, waitTurn)
		if err != nil {
			return err
		}
		if rows, err = r.read(ctx, tx, cur); err != nil || len(rows) == 0 {
			return err
		}
		acked, pubErr = r.publish(ctx, rows)
		markOf(rows, acked).queue(last)
		return nil
	})
	switch {
	case errors.Is(err, errNotLeader):
		return 0, 0, err
	case err != nil:
		return len(rows), 0, errors.Join(pubErr, fmt.Errorf("outbox pass: %w", err))
	}
	return len(rows), countTrue(acked), pubErr
}

// mark is what a pass changes: the cursor's new place (txid "" when no row above it was
// tried), the retried rows that went out, and the rows above the cursor that were refused.
type mark struct {
	txid    string
	id      int64
	sent    []int64
	refused []int64
}

// markOf reads the outcome of a pass: acked[i] for rows[i], shorter than rows when publishing
// stopped early (the rows after it were not tried and stay above the cursor).
func markOf(rows []row, acked []bool) mark {
	var m mark
	for i, ok := range acked {
		switch x := rows[i]; {
		case x.retry && ok:
			m.sent = append(m.sent, x.id)
		case !x.retry:
			m.txid, m.id = x.txid, x.id
			if !ok {
				m.refused = append(m.refused, x.id)
			}
		}
	}
	return m
}

// queue puts on b the statements m needs, usually the cursor's move alone.
func (m mark) queue(b *pgx.Batch) {
	if m.txid != "" {
		b.Queue(`UPDATE outbox_cursor SET txid = $1::xid8, id = $2`, m.txid, m.id)
	}
	if len(m.sent) > 0 {
		b.Queue(`DELETE FROM outbox_retry WHERE id = ANY($1)`, m.sent)
	}
	if len(m.refused) > 0 {
		b.Queue(`INSERT INTO outbox_retry (id) SELECT unnest($1::bigint[]) ON CONFLICT DO NOTHING`, m.refused)
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// horizon is the oldest transaction still running that may belong to this database (as an
// xid8), or the next xid when there is none: every outbox row below it is committed or rolled
// back, so none of a still-open transaction is overtaken. The server's snapshot lists the
// running xid8s; those pg_stat_activity or pg_prepared_xacts show in another database are left
// out — they cannot write this outbox — so a transaction left open in another service's
// database on the same server holds nothing back (pg_snapshot_xmin alone is server-wide). A
// running xid not shown anywhere (its session just ended, or the relay's role may not see it)
// is counted as this database's: a late answer holds back a pass, never reorders one.
const horizon = `
		SELECT coalesce(
		         (SELECT min(x) FROM pg_snapshot_xip(snap.s) AS x
		           WHERE (x::text::bigint % 4294967296) NOT IN (
		                 SELECT backend_xid::text::bigint FROM pg_stat_activity
		                  WHERE datname IS DISTINCT FROM current_database() AND backend_xid IS NOT NULL
		                 UNION ALL
		                 SELECT transaction::text::bigint FROM pg_prepared_xacts WHERE database <> current_database())),
		         pg_snapshot_xmax(snap.s))
		  FROM (SELECT pg_current_snapshot() AS s) AS snap`

// place is where the relay stands: the cursor, and whether any row waits in outbox_retry.
type place struct {
	txid    string // xid8, as text
	id      int64
	retries bool
}

// lockAndPlace takes the relays' advisory lock, waiting for it with waitTurn and otherwise
// returning errNotLeader when another relay holds it, and reads the relay's place, in one
// round trip. The place is read by the statement after the lock's, so it is what the last
// relay to hold the lock committed.
func lockAndPlace(ctx context.Context, tx pgx.Tx, waitTurn bool) (place, error) {
	lock := `SELECT pg_try_advisory_xact_lock($1)`
	if waitTurn {
		lock = `SELECT true FROM pg_advisory_xact_lock($1)`
	}
	var leader bool
	var p place
	var b pgx.Batch
	b.Queue(lock, lockKey).QueryRow(func(r pgx.Row) error { return r.Scan(&leader) })
	b.Queue(`SELECT c.txid::text, c.id, EXISTS (SELECT 1 FROM outbox_retry) FROM outbox_cursor c`).
		QueryRow(func(r pgx.Row) error { return r.Scan(&p.txid, &p.id, &p.retries) })
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return place{}, fmt.Errorf("lock: %w", err)
	}
	if !leader {
		return place{}, errNotLeader
	}
	return p, nil
}

// read returns the rows of one batch: those in outbox_retry first (rare: JetStream refused
// them), then the rows above the cursor in the relay's order, below the horizon. Rows a relay
// of an earlier release marked published are not above the cursor's (migration 00003); a
// retried one it marked is published again, which the duplicate window absorbs.
func (r *Relay) read(ctx context.Context, tx pgx.Tx, p place) ([]row, error) {
	var out []row
	if p.retries {
		rs, err := tx.Query(ctx, `
			SELECT o.id, o.txid::text AS txid_text, true, o.event_id, o.subject, o.data, o.headers
			  FROM (SELECT id FROM outbox_retry ORDER BY id LIMIT $1) r,
			       LATERAL (SELECT * FROM outbox o WHERE o.id = r.id OFFSET 0) o
			 ORDER BY o.id`, r.opts.BatchSize)
		if out, err = collect(rs, err); err != nil {
			return nil, err
		}
	}
	if len(out) >= r.opts.BatchSize {
		return out, nil
	}
	// txid_text, not txid: ORDER BY txid would sort by an output column so named, as text.
	rs, err := tx.Query(ctx, `
		SELECT id, txid::text AS txid_text, false, event_id, subject, data, headers FROM outbox
		 WHERE published_at IS NULL AND (txid, id) > ($1::xid8, $2::bigint) AND txid < (`+horizon+`)
		 ORDER BY txid, id
		 LIMIT $3`, p.txid, p.id, r.opts.BatchSize-len(out))
	above, err := collect(rs, err)
	return append(out, above...), err
}

func collect(rs pgx.Rows, err error) ([]row, error) {
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	out, err := pgx.CollectRows(rs, func(rr pgx.CollectableRow) (row, error) {
		var x row
		err := rr.Scan(&x.id, &x.txid, &x.retry, &x.eventID, &x.subject, &x.data, &x.headers)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return out, nil
}

// publish sends rows asynchronously, in order, and waits for every ack. It returns for each
// row it sent whether JetStream stored it (a duplicate counts: the event is in the stream) —
// fewer than rows when a send failed, since the rows after it were not sent — and the first
// error.
func (r *Relay) publish(ctx context.Context, rows []row) ([]bool, error) {
	futures := make([]jetstream.PubAckFuture, 0, len(rows))
	spans := make([]trace.Span, 0, len(rows))
	var sendErr error
	for _, x := range rows {
		m := nats.NewMsg(x.subject)
		for k, v := range x.headers {
			m.Header[k] = []string{v}
		}
		m.Data = x.data
		span := startSend(ctx, x, m.Header)
		f, err := r.js.PublishMsgAsync(m, jetstream.WithMsgID(x.eventID))
		if err != nil {
			// Stop here: publishing later rows would put them ahead of this one.
			sendErr = fmt.Errorf("outbox publish %s: %w", x.eventID, err)
			endSend(span, sendErr)
			break
		}
		futures, spans = append(futures, f), append(spans, span)
	}
	acked := make([]bool, len(futures))
	var ackErr error
	for i, f := range futures {
		select {
		case <-f.Ok():
			acked[i] = true
			endSend(spans[i], nil)
		case err := <-f.Err():
			if ackErr == nil {
				ackErr = fmt.Errorf("outbox publish %s: %w", rows[i].eventID, err)
			}
			endSend(spans[i], err)
		case <-ctx.Done():
			for _, s := range spans[i:] {
				endSend(s, ctx.Err())
			}
			return nil, fmt.Errorf("outbox publish: %w", ctx.Err())
		}
	}
	return acked, errors.Join(ackErr, sendErr)
}

// cleanUp runs Cleanup at once and then every cleanupEvery, until ctx is done.
func (r *Relay) cleanUp(ctx context.Context) {
	tick := time.NewTicker(cleanupEvery)
	defer tick.Stop()
	for {
		switch n, err := r.Cleanup(ctx); {
		case err != nil && ctx.Err() == nil:
			r.log.ErrorContext(ctx, "clean up outbox", "err", err)
		case n > 0:
			r.log.InfoContext(ctx, "cleaned up outbox", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// cleanupChunk is the most rows one statement of Cleanup deletes: a backlog goes in short
// transactions, never one long DELETE holding back the relays of the whole server.
const cleanupChunk = 10000

// Cleanup deletes the published rows written more than Retention ago, cleanupChunk at a time
// until none is left, and returns how many. It does nothing when Retention is negative.
//
// It walks the primary key from the oldest row up to the first one written within Retention,
// so a run with nothing to delete reads a row or two: ids grow with time, and nothing but the
// primary key would find the old rows now that a published row is no longer updated.
func (r *Relay) Cleanup(ctx context.Context) (int64, error) {
	if r.opts.Retention < 0 {
		return 0, nil
	}
	var total int64
	for {
		tag, err := r.pool.Exec(ctx, `
			DELETE FROM outbox WHERE id IN (
				SELECT o.id FROM outbox_cursor c, outbox o
				 WHERE o.id < coalesce((SELECT y.id FROM outbox y WHERE y.created_at >= now() - $1::interval
				                         ORDER BY y.id LIMIT 1), 9223372036854775807)
				   AND o.created_at < now() - $1::interval
				   AND (o.published_at IS NOT NULL OR (o.txid, o.id) <= (c.txid, c.id))
				   AND NOT EXISTS (SELECT 1 FROM outbox_retry x WHERE x.id = o.id)
				 ORDER BY o.id
				 LIMIT $2)`,
			r.opts.Retention, cleanupChunk)
		if err != nil {
			return total, fmt.Errorf("outbox cleanup: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < cleanupChunk {
			return total, nil
		}
	}
}
