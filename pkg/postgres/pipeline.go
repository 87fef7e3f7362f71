package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Acquirer is a pool: InTxBatch on one saves the round trips of BEGIN and COMMIT.
type Acquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// pipeTx is a transaction on one connection whose BEGIN goes to the server with its first
// batch (pgx's Batch.BeginTx) and whose COMMIT goes with its last (commit). Until then nothing
// has reached the server: a transaction that is all batches costs one round trip per batch.
// A statement sent alone (Exec, Query, …) first begins the transaction in a round trip of its
// own, as pgx does.
type pipeTx struct {
	conn *pgx.Conn
	tx   pgx.Tx // nil until begun
	done bool   // committed or rolled back
}

var _ pgx.Tx = (*pipeTx)(nil)

// begun returns the transaction, beginning it if no statement has yet.
func (t *pipeTx) begun(ctx context.Context) (pgx.Tx, error) {
	if t.done {
		return nil, pgx.ErrTxClosed
	}
	if t.tx == nil {
		tx, err := t.conn.Begin(ctx)
		if err != nil {
			return nil, err
		}
		t.tx = tx
	}
	return t.tx, nil
}

// SendBatch sends b, led by the BEGIN when it is the transaction's first statement.
func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	switch {
	case t.done:
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	case t.tx != nil:
		return t.tx.SendBatch(ctx, b)
	}
	first := &pgx.Batch{}
	first.BeginTx(pgx.TxOptions{})
	first.QueuedQueries = append(first.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(ctx, first)
	t.tx = br.Tx() // closed by br.Close when the BEGIN failed
	return br
}

// commit sends last and the COMMIT in one round trip (led by the BEGIN when nothing was sent
// before). When a statement of last fails, the server skips the rest, COMMIT included, and the
// transaction is rolled back.
func (t *pipeTx) commit(ctx context.Context, last *pgx.Batch) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	t.done = true
	if t.tx == nil && last.Len() == 0 {
		return nil // nothing reached the server
	}
	b := &pgx.Batch{}
	if t.tx == nil {
		b.BeginTx(pgx.TxOptions{})
	}
	b.QueuedQueries = append(b.QueuedQueries, last.QueuedQueries...)
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() == "ROLLBACK" { // the transaction had failed before
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	err := t.conn.SendBatch(ctx, b).Close()
	if err != nil && t.conn.PgConn().TxStatus() != 'I' {
		if _, rbErr := t.conn.Exec(context.WithoutCancel(ctx), "rollback"); rbErr != nil {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr)) // the pool drops the connection
		}
	}
	return err
}

func (t *pipeTx) Commit(ctx context.Context) error { return t.commit(ctx, &pgx.Batch{}) }

func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	t.done = true
	if t.tx == nil {
		return nil
	}
	return t.tx.Rollback(ctx)
}

func (t *pipeTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return failed(err).Query()
	}
	return tx.Query(ctx, sql, args...)
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	tx, err := t.begun(ctx)
	if err != nil {
		return failed(err).QueryRow()
	}
	return tx.QueryRow(ctx, sql, args...)
}

func (t *pipeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

func (t *pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

// LargeObjects begins the transaction first, as every statement does; when that fails, every
// call of the result fails as on a closed transaction.
func (t *pipeTx) LargeObjects() pgx.LargeObjects {
	tx, err := t.begun(context.Background())
	if err != nil {
		b := &pgx.Batch{}
		b.BeginTx(pgx.TxOptions{})
		tx = pgx.FailedBatchResults(b, err).Tx()
	}
	return tx.LargeObjects()
}

// failed is what a statement that never ran answers: err, from pgx's own types.
func failed(err error) pgx.BatchResults { return pgx.FailedBatchResults(&pgx.Batch{}, err) }

func (t *pipeTx) Conn() *pgx.Conn { return t.conn }
