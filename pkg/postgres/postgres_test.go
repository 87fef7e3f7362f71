package postgres_test

import (
	"context"
	neturl "net/url"
	"testing"

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
