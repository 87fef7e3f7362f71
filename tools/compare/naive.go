package compare

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/stockflow/stockflow/pkg/postgres"
)

// counter is a naive design's one number: the stock. Nothing else is kept — no lock, no
// ledger, no deadline — which is the point.
type counter interface {
	set(ctx context.Context, n int64) error
	get(ctx context.Context) (int64, error)
	decr(ctx context.Context) error
	close() error
}

// poolSize is how many connections a naive design's buyers share, as an application
// server's pool would; buyers beyond it wait for one.
const poolSize = 32

// column is the single-column design: a row of sku(id, stock) in a scratch database.
type column struct {
	pool *pgxpool.Pool
	id   string
}

var _ counter = (*column)(nil)

// openColumn makes the scratch database db on the server at serverURL (once; concurrent runs
// share it), its sku table, and returns the row id of this run.
func openColumn(ctx context.Context, serverURL, db, id string) (*column, error) {
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize())
	admin.Close(ctx)
	if err != nil && !alreadyThere(err) {
		return nil, fmt.Errorf("create scratch database %s: %w", db, err)
	}
	url, err := postgres.WithDatabase(serverURL, db)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = poolSize
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open scratch database %s: %w", db, err)
	}
	// The article's first version: a product table with a stock field. No CHECK (stock >= 0):
	// the design has none, and the column going below zero is what overselling looks like.
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS sku (id text PRIMARY KEY, stock bigint NOT NULL)`); err != nil && !alreadyThere(err) {
		pool.Close()
		return nil, fmt.Errorf("create table sku: %w", err)
	}
	return &column{pool: pool, id: id}, nil
}

// alreadyThere reports whether err is a concurrent run having created the same database or
// table first.
func alreadyThere(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P04" || pe.Code == "42P07" || pe.Code == "23505")
}

func (c *column) set(ctx context.Context, n int64) error {
	_, err := c.pool.Exec(ctx, `INSERT INTO sku (id, stock) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET stock = $2`, c.id, n)
	return err
}

func (c *column) get(ctx context.Context) (int64, error) {
	var n int64
	err := c.pool.QueryRow(ctx, `SELECT stock FROM sku WHERE id = $1`, c.id).Scan(&n)
	return n, err
}

func (c *column) decr(ctx context.Context) error {
	_, err := c.pool.Exec(ctx, `UPDATE sku SET stock = stock - 1 WHERE id = $1`, c.id)
	return err
}

// close removes this run's row (the table stays for the next run) and the pool.
func (c *column) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	defer c.pool.Close()
	if _, err := c.pool.Exec(ctx, `DELETE FROM sku WHERE id = $1`, c.id); err != nil {
		return fmt.Errorf("single-column: remove this run's row: %w", err)
	}
	return nil
}

// redisCounter is the redis-only design: one key, the only truth.
type redisCounter struct {
	rdb *redis.Client
	key string
}

var _ counter = (*redisCounter)(nil)

func openCounter(ctx context.Context, url, key string) (*redisCounter, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", url, err)
	}
	opts.PoolSize = poolSize
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", opts.Addr, err)
	}
	return &redisCounter{rdb: rdb, key: key}, nil
}

// set writes n with an hour to live: a run's key never outlives it by much.
func (r *redisCounter) set(ctx context.Context, n int64) error {
	return r.rdb.Set(ctx, r.key, n, time.Hour).Err()
}

func (r *redisCounter) get(ctx context.Context) (int64, error) {
	s, err := r.rdb.Get(ctx, r.key).Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

func (r *redisCounter) decr(ctx context.Context) error { return r.rdb.Decr(ctx, r.key).Err() }

func (r *redisCounter) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.rdb.Del(ctx, r.key).Err(); err != nil {
		return errors.Join(fmt.Errorf("redis-only: remove this run's key: %w", err), r.rdb.Close())
	}
	return r.rdb.Close()
}

// runNaive runs the sale on a naive design: each buyer reads the stock, checks it is above
// zero, thinks for Think and decrements it — three steps, each on its own. A buyer who then
// does not pay keeps the unit for ever: the design has nowhere to record that it was only
// promised. The books are the counter: available is its value, sold is what it lost.
func runNaive(ctx context.Context, d *designRun, store counter) error {
	cfg := d.cfg
	if err := store.set(ctx, cfg.Units); err != nil {
		return fmt.Errorf("put %d units on sale: %w", cfg.Units, err)
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	var sampling sync.WaitGroup
	sampling.Go(func() {
		d.sampleEvery(sampleCtx, func(ctx context.Context) error {
			n, err := store.get(ctx)
			if err == nil {
				d.sample(n, 0, cfg.Units-n)
			}
			return err
		})
	})

	t := &truth{units: cfg.Units}
	var mu sync.Mutex
	var errs []error
	buy := func(b buyer) {
		asked := time.Now()
		err := func() error {
			n, err := store.get(ctx)
			if err != nil {
				return fmt.Errorf("read the stock: %w", err)
			}
			if n <= 0 {
				t.refused(time.Now())
				return nil
			}
			if !pause(ctx, cfg.Think) {
				return ctx.Err()
			}
			if err := store.decr(ctx); err != nil {
				return fmt.Errorf("decrement the stock: %w", err)
			}
			// Paying changes nothing in these books; the buyer simply keeps the unit.
			t.held(hold{wave: b.wave, asked: asked, deadline: time.Now().Add(cfg.Deadline), paid: b.pays})
			return nil
		}()
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	runWave(ctx, d.first, buy)
	next := t.lastDeadline(1).Add(cfg.Grace)
	d.logf("%s: first wave over; the second comes at its last deadline + %s", d.design.Name, cfg.Grace)
	if !pause(ctx, time.Until(next)) {
		return ctx.Err()
	}
	runWave(ctx, d.second, buy)
	stopSampling()
	sampling.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d buyers failed, the first: %w", len(errs), errs[0])
	}
	n, err := store.get(ctx)
	if err != nil {
		return fmt.Errorf("read the final stock: %w", err)
	}
	d.sample(n, 0, cfg.Units-n)
	tl := t.tally()
	d.rep.result(d.design, Result{
		Sold:           tl.paid,
		Oversold:       max(0, tl.holds-cfg.Units),
		Stuck:          tl.unpaid,
		TurnedAway:     tl.refusedWhileFree,
		SecondWaveSold: tl.secondWavePaid,
		Orders:         tl.holds,
	}, tl.refused, tl.paid)
	return nil
}
