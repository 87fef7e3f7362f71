package app_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	stockpg "github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// The lock benchmarks of DESIGN §7 (make bench). Every op is one buyer's order. naive is the
// textbook path: per order one transaction, per line a conditional UPDATE … WHERE available
// >= n RETURNING the figures and the INSERT of its ledger row. engine is stockflow's lock path
// as the service runs it (app.Service.LockForOrder, combining on, default options): order
// header, lock rows, ledger rows, outbox rows. engine-4slots is the same with the SKU split
// into 4 slots (hot SKU only). Each sub-benchmark gets a fresh database and a pool as large as
// its clients, at most 64 connections: 256 clients queue on it, as buyers queue on a
// service's pool. After each: no oversell, every ledger fold equals its summary.

// BenchmarkLockHotSKU: one SKU, each op one buyer locking 1 unit.
func BenchmarkLockHotSKU(b *testing.B) {
	for _, path := range []string{"naive", "engine", "engine-4slots"} {
		for _, clients := range []int{1, 8, 64, 256} {
			b.Run(fmt.Sprintf("%s/clients=%d", path, clients), func(b *testing.B) {
				env := newBenchEnv(b, clients)
				_, err := env.svc.CreateSKU(context.Background(), "HOT", int64(b.N), "bench")
				require.NoError(b, err)
				if path == "engine-4slots" {
					_, _, err := env.svc.SetSlots(context.Background(), "HOT", 4, "bench")
					require.NoError(b, err)
				}
				orders := make([][]events.Line, b.N)
				for i := range orders {
					orders[i] = []events.Line{{SKU: "HOT", Qty: 1}}
				}
				locked := env.run(b, path, clients, orders)
				env.check(b, path)
				require.Equal(b, int64(b.N), locked, "every buyer got a unit: the SKU had one for each")
			})
		}
	}
}

// BenchmarkLockZipf: 10,000 SKUs picked Zipf-distributed (a few hot, a long tail), 1–3 lines
// per order, 64 clients.
func BenchmarkLockZipf(b *testing.B) {
	const skus = 10_000
	for _, path := range []string{"naive", "engine"} {
		b.Run(path+"/clients=64", func(b *testing.B) {
			env := newBenchEnv(b, 64)
			env.createMany(b, skus, int64(3*b.N))
			r := rand.New(rand.NewPCG(1, 2)) // the same orders for both paths
			zipf := rand.NewZipf(r, 1.1, 1, skus-1)
			orders := make([][]events.Line, b.N)
			for i := range orders {
				for range 1 + r.IntN(3) {
					orders[i] = append(orders[i], events.Line{SKU: fmt.Sprintf("Z%d", zipf.Uint64()), Qty: int64(1 + r.IntN(2))})
				}
			}
			locked := env.run(b, path, 64, orders)
			env.check(b, path)
			require.Positive(b, locked)
		})
	}
}

type benchEnv struct {
	pool *pgxpool.Pool
	svc  *app.Service
}

func newBenchEnv(b *testing.B, clients int) *benchEnv {
	_, url := pgtest.New(b, service.Schemas(stockpg.Schema)...)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(b, err)
	cfg.MaxConns = int32(min(clients, 64))
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	svc := app.New(stockpg.NewStore(pool))
	b.Cleanup(svc.Close)
	return &benchEnv{pool: pool, svc: svc}
}

// createMany creates SKUs Z0…Z(n-1) with onHand units each, opening ledger rows included, in
// three statements (CreateSKU would take a transaction each).
func (e *benchEnv) createMany(b *testing.B, n int, onHand int64) {
	err := postgres.InTx(context.Background(), e.pool, func(tx pgx.Tx) error {
		for _, sql := range []string{
			`INSERT INTO sku (sku) SELECT 'Z' || g FROM generate_series(0, $1::int - 1) AS g WHERE $2::bigint IS NOT NULL`,
			`INSERT INTO sku_stock (sku, slot, on_hand, available) SELECT 'Z' || g, 0, $2::bigint, $2::bigint FROM generate_series(0, $1::int - 1) AS g`,
			`INSERT INTO stock_ledger (sku, change_type, qty, on_hand_before, locked_before, sold_before, incoming_before,
			        on_hand_after, locked_after, sold_after, incoming_after, operator, remark, idempotency_key)
			 SELECT 'Z' || g, 'stocktake', $2::bigint, 0, 0, 0, 0, $2::bigint, 0, 0, 0, 'bench', 'opening balance', 'opening/Z' || g
			   FROM generate_series(0, $1::int - 1) AS g`,
		} {
			if _, err := tx.Exec(context.Background(), sql, n, onHand); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(b, err)
}

// errRejected is a naive order that did not fit (an outcome, like the engine's rejection).
var errRejected = errors.New("rejected")

// run locks orders[i] as order i from clients goroutines on path, reports locks/s and p99-ms,
// and returns the units locked.
func (e *benchEnv) run(b *testing.B, path string, clients int, orders [][]events.Line) int64 {
	deadline := time.Now().Add(time.Hour)
	lock := func(ctx context.Context, i int) (bool, error) {
		res, err := e.svc.LockForOrder(ctx, nil, fmt.Sprintf("o%d", i), orders[i], deadline, "bench")
		return res.Locked, err
	}
	if path == "naive" {
		lock = func(ctx context.Context, i int) (bool, error) {
			err := naiveLock(ctx, e.pool, fmt.Sprintf("o%d", i), orders[i])
			if errors.Is(err, errRejected) {
				return false, nil
			}
			return err == nil, err
		}
	}
	var next, units atomic.Int64
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				t0 := time.Now()
				ok, err := lock(context.Background(), i)
				if err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(t0)
				if ok {
					for _, l := range orders[i] {
						units.Add(l.Qty)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "locks/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	var locked int64
	require.NoError(b, e.pool.QueryRow(context.Background(), `SELECT coalesce(sum(locked), 0) FROM sku_stock`).Scan(&locked))
	require.Equal(b, units.Load(), locked, "the units locked are the units of the orders told they locked")
	return locked
}

// check fails the benchmark on any oversell or any difference between a ledger fold and its
// summary. The naive path writes no lock rows, so only its ledger is compared.
func (e *benchEnv) check(b *testing.B, path string) {
	var oversold int
	require.NoError(b, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM sku_stock WHERE available < 0 OR available <> on_hand - locked - sold`).Scan(&oversold))
	require.Zero(b, oversold, "no oversell")
	diffs, err := e.svc.Verify(context.Background())
	require.NoError(b, err)
	for _, d := range diffs {
		if path == "naive" && d.Check == "locks" {
			continue
		}
		b.Fatalf("%s: ledger and summary differ: %+v", path, d)
	}
}

// naiveLock is the textbook lock: one transaction, per line (in SKU order) a conditional
// update that returns the new figures, then the ledger row.
func naiveLock(ctx context.Context, pool *pgxpool.Pool, orderID string, raw []events.Line) error {
	lines, err := stock.ParseLines(raw)
	if err != nil {
		return err
	}
	return postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		for _, l := range lines {
			n := l.Qty.Int64()
			var q stock.Quantities
			err := tx.QueryRow(ctx, `UPDATE sku_stock SET locked = locked + $2, available = available - $2, updated_at = now()
				WHERE sku = $1 AND available >= $2 RETURNING on_hand, locked, sold, incoming`, l.SKU, n).
				Scan(&q.OnHand, &q.Locked, &q.Sold, &q.Incoming)
			if errors.Is(err, pgx.ErrNoRows) {
				return errRejected
			}
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO stock_ledger (sku, change_type, qty, on_hand_before, locked_before, sold_before, incoming_before,
				on_hand_after, locked_after, sold_after, incoming_after, order_id, operator, idempotency_key)
				VALUES ($1, 'lock', $2, $3, $4, $5, $6, $3, $4::bigint + $2::bigint, $5, $6, $7, 'bench', $7::text || '/' || $1::text)`,
				l.SKU, n, q.OnHand, q.Locked-n, q.Sold, q.Incoming, orderID)
			if err != nil {
				return err
			}
		}
		return nil
	})
}
