package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// sends records what a connection sends: a batch's statements, or one statement alone.
type sends struct {
	mu   sync.Mutex
	sent [][]string
}

func (s *sends) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, []string{d.SQL})
	return ctx
}

func (s *sends) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sends) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sqls []string
	for _, q := range d.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	s.sent = append(s.sent, sqls)
	return ctx
}

func (s *sends) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *sends) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (s *sends) take() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

// tracedPool is a one-connection pool on a fresh database with table t (k text PRIMARY KEY),
// whose sends are recorded.
func tracedPool(t *testing.T) (*pgxpool.Pool, *sends) {
	ctx := context.Background()
	_, url := pgtest.New(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	s := &sends{}
	cfg.ConnConfig.Tracer = s
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `CREATE TABLE t (k text PRIMARY KEY)`)
	require.NoError(t, err)
	s.take()
	return pool, s
}

// insertBatch inserts k into t in a batch of its own.
func insertBatch(ctx context.Context, tx pgx.Tx, k string) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO t VALUES ($1)`, k)
	return tx.SendBatch(ctx, b).Close()
}

func keys(t *testing.T, pool *pgxpool.Pool) []string {
	rows, err := pool.Query(context.Background(), `SELECT k FROM t ORDER BY k`)
	require.NoError(t, err)
	ks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ks
}

// TestATransactionOfBatchesCostsARoundTripPerBatch: on a pool, BEGIN goes with the first batch
// and COMMIT with the last, so a transaction of a read batch and its last writes is two round
// trips; the writes of both are committed together.
func TestATransactionOfBatchesCostsARoundTripPerBatch(t *testing.T) {
	ctx := context.Background()
	pool, sent := tracedPool(t)
	err := postgres.InTxBatch(ctx, pool, func(tx pgx.Tx, last *pgx.Batch) error {
		var n int
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES ('a')`)
		b.Queue(`SELECT count(*) FROM t`).QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		require.Equal(t, 1, n, "the batch ran inside the transaction")
		last.Queue(`INSERT INTO t VALUES ('b')`)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, [][]string{
		{"begin", `INSERT INTO t VALUES ('a')`, `SELECT count(*) FROM t`},
		{`INSERT INTO t VALUES ('b')`, "commit"},
	}, sent.take())
	assert.Equal(t, []string{"a", "b"}, keys(t, pool))
	sent.take()

	// A statement sent alone begins the transaction first, on its own.
	err = postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO t VALUES ('c')`)
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"begin"}, {`INSERT INTO t VALUES ('c')`}, {"commit"}}, sent.take())

	// Nothing sent, nothing to commit.
	require.NoError(t, postgres.InTx(ctx, pool, func(pgx.Tx) error { return nil }))
	assert.Empty(t, sent.take())
}

// TestAFailedLastWriteRollsBackTheWholeTransaction: a statement of the last batch that fails
// skips the COMMIT; nothing of the transaction stays, the error is returned and the connection
// is clean for the next transaction.
func TestAFailedLastWriteRollsBackTheWholeTransaction(t *testing.T) {
	ctx := context.Background()
	pool, _ := tracedPool(t)
	_, err := pool.Exec(ctx, `INSERT INTO t VALUES ('taken')`)
	require.NoError(t, err)
	err = postgres.InTxBatch(ctx, pool, func(tx pgx.Tx, last *pgx.Batch) error {
		if err := insertBatch(ctx, tx, "x"); err != nil {
			return err
		}
		last.Queue(`INSERT INTO t VALUES ('y')`)
		last.Queue(`INSERT INTO t VALUES ('taken')`)
		return nil
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "23505", pgErr.Code)
	assert.Equal(t, []string{"taken"}, keys(t, pool), "x and y rolled back")
	assert.Equal(t, int32(1), pool.Stat().TotalConns(), "the connection was kept, outside any transaction")

	// A transaction that failed earlier (an error fn chose to drop) does not pass for committed.
	err = postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, _ = tx.Exec(ctx, `INSERT INTO t VALUES ('taken')`)
		return nil
	})
	require.ErrorIs(t, err, pgx.ErrTxCommitRollback)

	// An error from fn, and a panic, roll back what was sent, BEGIN-led batch included.
	boom := errors.New("boom")
	err = postgres.InTxBatch(ctx, pool, func(tx pgx.Tx, last *pgx.Batch) error {
		if err := insertBatch(ctx, tx, "z"); err != nil {
			return err
		}
		last.Queue(`INSERT INTO t VALUES ('w')`)
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Panics(t, func() {
		_ = postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
			if err := insertBatch(ctx, tx, "p"); err != nil {
				return err
			}
			panic("mid-transaction")
		})
	})
	assert.Equal(t, []string{"taken"}, keys(t, pool))
}

// TestInTxBatchInAnOuterTransaction: on a transaction (not a pool) InTxBatch nests as a
// savepoint; last still goes in before it is released.
func TestInTxBatchInAnOuterTransaction(t *testing.T) {
	ctx := context.Background()
	pool, _ := tracedPool(t)
	err := postgres.InTx(ctx, pool, func(outer pgx.Tx) error {
		return postgres.InTxBatch(ctx, outer, func(_ pgx.Tx, last *pgx.Batch) error {
			last.Queue(`INSERT INTO t VALUES ('n')`)
			return nil
		})
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"n"}, keys(t, pool))
}
