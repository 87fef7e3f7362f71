package postgres_test

import (
	"context"
	"fmt"
	neturl "net/url"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// TestConnectEndsSessionsIdleInATransaction: a service's sessions carry an idle-in-transaction
// timeout, so a transaction left open cannot hold locks and its outbox relay forever, and a
// statement timeout; the URL may set others.
func TestConnectEndsSessionsIdleInATransaction(t *testing.T) {
	ctx := context.Background()
	_, url := pgtest.New(t)
	show := func(url string) (idle, statement string) {
		pool, err := postgres.Connect(ctx, url)
		require.NoError(t, err)
		defer pool.Close()
		require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('statement_timeout')`).Scan(&idle, &statement))
		return idle, statement
	}
	idle, statement := show(url)
	assert.Equal(t, "1min", idle)
	assert.Equal(t, "30s", statement)
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	q := u.Query()
	q.Set("idle_in_transaction_session_timeout", "5s")
	q.Set("statement_timeout", "2s")
	u.RawQuery = q.Encode()
	idle, statement = show(u.String())
	assert.Equal(t, "5s", idle)
	assert.Equal(t, "2s", statement)

	// A statement past the timeout fails (and changes nothing) instead of holding its caller.
	pool, err := postgres.Connect(ctx, u.String())
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `SELECT pg_sleep(3)`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "57014", pgErr.Code, "query_canceled by statement_timeout")
}

// TestReplicasStartingTogetherCreateAndMigrateOneDatabase: processes that start at once on a
// fresh server (two replicas of a service) all succeed: one creates the database and applies
// the migrations, the others find them done. A pool parameter in the URL is not sent to the
// server as a setting.
func TestReplicasStartingTogetherCreateAndMigrateOneDatabase(t *testing.T) {
	ctx := context.Background()
	name := fmt.Sprintf("sf_race_%d", time.Now().UnixNano())
	url, err := postgres.WithDatabase(pgtest.ServerURL(), name)
	require.NoError(t, err)
	url += "?pool_max_conns=3"
	t.Cleanup(func() {
		admin, err := pgx.Connect(ctx, pgtest.ServerURL())
		if err == nil {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			_ = admin.Close(ctx)
		}
	})
	schema := postgres.Schema{Name: "race", FS: fstest.MapFS{
		"00001_a.sql": {Data: []byte("-- +goose Up\nCREATE TABLE a (id int PRIMARY KEY);\nCREATE TYPE a_kind AS ENUM ('x');\n")},
		"00002_b.sql": {Data: []byte("-- +goose Up\nCREATE TABLE b (id int PRIMARY KEY);\n")},
	}}
	const replicas = 6
	errs := make(chan error, replicas)
	var wg sync.WaitGroup
	for range replicas {
		wg.Go(func() {
			if err := postgres.EnsureDatabase(ctx, url); err != nil {
				errs <- err
				return
			}
			pool, err := postgres.Connect(ctx, url)
			if err != nil {
				errs <- err
				return
			}
			defer pool.Close()
			errs <- postgres.Migrate(ctx, pool, schema)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	pool, err := postgres.Connect(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	var applied int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM goose_race WHERE version_id > 0`).Scan(&applied))
	assert.Equal(t, 2, applied, "each migration applied once")
}
