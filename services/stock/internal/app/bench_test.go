package app_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	stockpg "github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// BenchmarkLockHotSKU: every op is one buyer locking 1 unit of the same SKU. naive is the
// textbook per-order conditional update plus ledger insert in its own transaction; engine is
// stockflow's lock path (order header, conditional update + ledger in one statement, lock row,
// outbox row). Each sub-benchmark gets a fresh database and a pool as large as its clients, at
// most 64 connections (PostgreSQL's default max_connections is 100): 256 clients queue on it,
// as buyers queue on a service's pool.
func BenchmarkLockHotSKU(b *testing.B) {
	for _, path := range []string{"naive", "engine"} {
		for _, clients := range []int{1, 8, 64, 256} {
			b.Run(fmt.Sprintf("%s/clients=%d", path, clients), func(b *testing.B) {
				_, url := pgtest.New(b, service.Schemas(stockpg.Schema)...)
				cfg, err := pgxpool.ParseConfig(url)
				require.NoError(b, err)
				cfg.MaxConns = int32(min(clients, 64))
				pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
				require.NoError(b, err)
				defer pool.Close()
				svc := app.New(stockpg.NewStore(pool))
				_, err = svc.CreateSKU(context.Background(), "HOT", int64(b.N)+1, "bench")
				require.NoError(b, err)

				lock := engineLock(svc)
				if path == "naive" {
					lock = naiveLock(pool)
				}
				runClients(b, clients, lock)

				diffs, err := svc.Store().Verify(context.Background())
				require.NoError(b, err)
				if path == "engine" {
					require.Empty(b, diffs, "ledger fold equals summary")
				}
				s, err := svc.Store().GetSKU(context.Background(), "HOT")
				require.NoError(b, err)
				require.GreaterOrEqual(b, s.Available(), int64(0), "no oversell")
				require.Equal(b, int64(b.N), s.Locked)
			})
		}
	}
}

func engineLock(svc *app.Service) func(ctx context.Context, i int64) error {
	deadline := time.Now().Add(time.Hour)
	return func(ctx context.Context, i int64) error {
		res, err := svc.LockForOrder(ctx, nil, fmt.Sprintf("o%d", i), []stock.Line{{SKU: "HOT", Qty: stock.MustQty(1)}}, deadline, "bench")
		if err == nil && !res.Locked {
			err = fmt.Errorf("order %d rejected", i)
		}
		return err
	}
}

func naiveLock(pool *pgxpool.Pool) func(ctx context.Context, i int64) error {
	return func(ctx context.Context, i int64) error {
		return postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE sku_stock SET locked = locked + 1, available = available - 1 WHERE sku = 'HOT' AND available >= 1`)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("order %d: insufficient", i)
			}
			_, err = tx.Exec(ctx, `INSERT INTO stock_ledger (sku, change_type, qty, on_hand_before, locked_before, sold_before, incoming_before,
				on_hand_after, locked_after, sold_after, incoming_after, order_id, operator, idempotency_key)
				VALUES ('HOT', 'lock', 1, 0, 0, 0, 0, 0, 1, 0, 0, $1, 'bench', $1)`, fmt.Sprintf("o%d", i))
			return err
		})
	}
}

// runClients runs b.N ops from the given number of goroutines and reports locks/s and p99-ms.
func runClients(b *testing.B, clients int, op func(ctx context.Context, i int64) error) {
	var next atomic.Int64
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := op(context.Background(), i); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(t0)
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
}
