// Package postgres holds the PostgreSQL plumbing every service shares: the pgx pool, the one
// transaction helper, and embedded migrations applied with goose. It knows no business rules.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

// DefaultURL is the database a developer machine of this project runs (trust auth).
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres"

// Connect opens a pool and checks that the server answers. Its sessions start with
// sessionDefaults (an idle-in-transaction and a statement timeout) unless the URL says otherwise.
func Connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgx's default (4 on this machine's 2 cores) starves a service whose consumers run
		// several handlers at once; 12 per service keeps four services well under
		// PostgreSQL's default max_connections of 100.
		cfg.MaxConns = 12
	}
	for param, value := range sessionDefaults {
		if _, set := cfg.ConnConfig.RuntimeParams[param]; !set {
			cfg.ConnConfig.RuntimeParams[param] = value
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// sessionDefaults are the settings every service session starts with unless the URL sets them
// (a parameter of the same name):
//   - idle_in_transaction_session_timeout 60s: no use case waits that long between
//     statements, and a transaction left open holds row locks and its database's outbox
//     relay (review F8);
//   - statement_timeout 30s: no use case's statement runs that long, and one stuck on a lock
//     or a runaway plan holds a consumer's worker and its message; it fails and is retried.
//
// Migrate runs without the statement timeout: an index build may take longer.
var sessionDefaults = map[string]string{
	"idle_in_transaction_session_timeout": "60s",
	statementTimeout:                      "30s",
}

const statementTimeout = "statement_timeout"

// Beginner is what InTx needs: a pool, a connection or an outer transaction.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// InTx runs fn in one transaction and commits when fn returns nil. A failed rollback is joined
// with the error that caused it, and a failed commit is returned: neither is ever dropped.
func InTx(ctx context.Context, db Beginner, fn func(pgx.Tx) error) error {
	return InTxBatch(ctx, db, func(tx pgx.Tx, _ *pgx.Batch) error { return fn(tx) })
}

// InTxBatch is InTx for a transaction that ends with writes nothing reads back: fn queues them
// on last, and they go to the server with the COMMIT. On a pool (Acquirer) the transaction's
// BEGIN goes with its first batch, and last with the COMMIT, in one round trip: a transaction
// of n batches costs n round trips, not n + 2. A statement of last that fails rolls everything
// back and is returned as the commit's error.
func InTxBatch(ctx context.Context, db Beginner, fn func(tx pgx.Tx, last *pgx.Batch) error) (err error) {
	var tx interface {
		pgx.Tx
		commit(context.Context, *pgx.Batch) error
	}
	if p, ok := db.(Acquirer); ok {
		c, err := p.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer c.Release() // a connection still inside a transaction is closed, never reused
		tx = &pipeTx{conn: c.Conn()}
	} else {
		begun, err := db.Begin(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		tx = plainTx{begun}
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			panic(p)
		}
	}()
	last := &pgx.Batch{}
	if err := fn(tx, last); err != nil {
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			return errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return err
	}
	if err := tx.commit(ctx, last); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// plainTx is a transaction begun on its own (in an outer transaction, on a connection):
// last is sent, then the COMMIT.
type plainTx struct{ pgx.Tx }

func (t plainTx) commit(ctx context.Context, last *pgx.Batch) error {
	if last.Len() > 0 {
		if err := t.SendBatch(ctx, last).Close(); err != nil {
			if rbErr := t.Rollback(context.WithoutCancel(ctx)); rbErr != nil {
				return errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
			}
			return err
		}
	}
	return t.Commit(ctx)
}

// Schema is one set of embedded goose migrations (the *.sql files at the root of FS) with its
// own version table goose_<Name>, so a service's schema and the shared outbox and inbox
// schemas each keep their own numbering.
type Schema struct {
	Name string
	FS   fs.FS
}

// Migrate applies every pending migration of each schema, in order.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schemas ...Schema) error {
	cfg := pool.Config()
	cfg.ConnConfig.RuntimeParams[statementTimeout] = "0" // a migration may build an index for minutes
	cfg.MaxConns = 1
	mpool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	defer mpool.Close()
	db := stdlib.OpenDBFromPool(mpool)
	defer db.Close()
	for _, s := range schemas {
		store, err := database.NewStore(database.DialectPostgres, "goose_"+s.Name)
		if err != nil {
			return fmt.Errorf("migrations %s: %w", s.Name, err)
		}
		// Replicas starting together migrate one at a time: the others wait on an advisory
		// lock (checked each second, for up to 5 minutes), then find nothing pending.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
		if err != nil {
			return fmt.Errorf("migrations %s: %w", s.Name, err)
		}
		p, err := goose.NewProvider("", db, s.FS, goose.WithStore(store), goose.WithSessionLocker(locker))
		if err != nil {
			return fmt.Errorf("load migrations %s: %w", s.Name, err)
		}
		if _, err := p.Up(ctx); err != nil {
			return fmt.Errorf("apply migrations %s: %w", s.Name, err)
		}
	}
	return nil
}

// EnsureDatabase creates the database named in url when it does not exist yet, connecting to
// the server's maintenance database to do so. It lets a fresh server host every service.
func EnsureDatabase(ctx context.Context, url string) error {
	pcfg, err := pgxpool.ParseConfig(url) // takes the pool's own parameters (pool_max_conns) out
	if err != nil {
		return fmt.Errorf("parse database url: %w", err)
	}
	cfg := pcfg.ConnConfig
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to maintenance database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr interface{ SQLState() string }
	// Created by a concurrent caller: 42P04 when it committed first, 23505 on pg_database's
	// name index when the two raced inside CREATE DATABASE.
	if errors.As(err, &pgErr) && (pgErr.SQLState() == "42P04" || pgErr.SQLState() == "23505") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// WithDatabase returns url with its database name replaced, so one server URL can address
// the database of every service.
func WithDatabase(rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("database url must be postgres://…: %q", rawURL)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// MigrationsSchema is the Schema of the goose migrations embedded under migrations/ in fsys
// (declare `//go:embed migrations/*.sql`).
func MigrationsSchema(name string, fsys fs.FS) Schema {
	sub, err := fs.Sub(fsys, "migrations")
	if err != nil {
		panic(err) // "migrations" is a valid path: Sub cannot fail on it
	}
	return Schema{Name: name, FS: sub}
}
