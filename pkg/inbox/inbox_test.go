package inbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

func claim(t *testing.T, db postgres.Beginner, consumer, id string) bool {
	t.Helper()
	var fresh bool
	require.NoError(t, postgres.InTx(context.Background(), db, func(tx pgx.Tx) error {
		var err error
		fresh, err = inbox.Claim(context.Background(), tx, consumer, id)
		return err
	}))
	return fresh
}

func TestClaim(t *testing.T) {
	pool, _ := pgtest.New(t, inbox.Schema)

	assert.True(t, claim(t, pool, "stock", "ev-1"), "first claim")
	assert.False(t, claim(t, pool, "stock", "ev-1"), "second claim of the same message")
	assert.True(t, claim(t, pool, "order", "ev-1"), "another consumer has its own claims")
	assert.True(t, claim(t, pool, "stock", "ev-2"), "another message")
}

func TestClaimRolledBackWithTheEffect(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, inbox.Schema)
	errEffect := errors.New("effect failed")
	err := postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		fresh, err := inbox.Claim(ctx, tx, "stock", "ev-1")
		require.NoError(t, err)
		require.True(t, fresh)
		return errEffect
	})
	require.ErrorIs(t, err, errEffect)
	assert.True(t, claim(t, pool, "stock", "ev-1"), "a rolled-back claim does not count")
}

func TestConcurrentClaimsExactlyOneFresh(t *testing.T) {
	pool, _ := pgtest.New(t, inbox.Schema)
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if claim(t, pool, "stock", "ev-race") {
				fresh.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, fresh.Load())
}

func TestClaimRejectsEmptyIDs(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, inbox.Schema)
	err := postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := inbox.Claim(ctx, tx, "stock", "")
		return err
	})
	assert.Error(t, err)
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, inbox.Schema)
	claim(t, pool, "stock", "old")
	claim(t, pool, "stock", "new")
	_, err := pool.Exec(ctx, `UPDATE inbox SET processed_at = now() - interval '40 days' WHERE message_id = 'old'`)
	require.NoError(t, err)

	n, err := inbox.Prune(ctx, pool, 30*24*time.Hour)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	assert.True(t, claim(t, pool, "stock", "old"), "pruned claim can be claimed again")
	assert.False(t, claim(t, pool, "stock", "new"), "recent claim kept")
}

// TestPruneDeletesABacklogInChunks: more old claims than one statement deletes all go, and a
// fresh claim stays.
func TestPruneDeletesABacklogInChunks(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, inbox.Schema)
	_, err := pool.Exec(ctx, `INSERT INTO inbox (consumer, message_id, processed_at)
		SELECT 'stock', 'old-' || i, now() - interval '40 days' FROM generate_series(1, 25001) AS i`)
	require.NoError(t, err)
	claim(t, pool, "stock", "new")

	n, err := inbox.Prune(ctx, pool, 30*24*time.Hour)
	require.NoError(t, err)
	assert.EqualValues(t, 25001, n)
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM inbox`).Scan(&left))
	assert.Equal(t, 1, left, "only the fresh claim is left")
}

func TestClaimAllTellsFreshFromSeenInOrder(t *testing.T) {
	pool, _ := pgtest.New(t, inbox.Schema)
	require.True(t, claim(t, pool, "stock", "ev-2"))

	var fresh []bool
	err := postgres.InTx(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		fresh, err = inbox.ClaimAll(context.Background(), tx, []inbox.Message{
			{Consumer: "stock", ID: "ev-3"}, {Consumer: "stock", ID: "ev-2"}, {Consumer: "stock", ID: "ev-1"}, {Consumer: "stock", ID: "ev-3"},
		})
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true, false}, fresh, "ev-2 was seen before; ev-3 twice in one batch is fresh once")
	assert.False(t, claim(t, pool, "stock", "ev-3"), "the batch's claims committed")

	err = postgres.InTx(context.Background(), pool, func(tx pgx.Tx) error {
		if _, err := inbox.ClaimAll(context.Background(), tx, []inbox.Message{{Consumer: "stock", ID: "ev-4"}, {Consumer: "stock", ID: "ev-5"}}); err != nil {
			return err
		}
		return inbox.Unclaim(context.Background(), tx, []inbox.Message{{Consumer: "stock", ID: "ev-5"}})
	})
	require.NoError(t, err)
	assert.False(t, claim(t, pool, "stock", "ev-4"), "kept")
	assert.True(t, claim(t, pool, "stock", "ev-5"), "withdrawn: its redelivery is fresh")
}
