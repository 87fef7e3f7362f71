package postgres_test

import (
	"context"
	neturl "net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// TestConnectEndsSessionsIdleInATransaction: a service's sessions carry an idle-in-transaction
// timeout, so a transaction left open cannot hold locks and its outbox relay forever; the URL
// may set another.
func TestConnectEndsSessionsIdleInATransaction(t *testing.T) {
	ctx := context.Background()
	_, url := pgtest.New(t)
	show := func(url string) string {
		pool, err := postgres.Connect(ctx, url)
		require.NoError(t, err)
		defer pool.Close()
		var v string
		require.NoError(t, pool.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&v))
		return v
	}
	assert.Equal(t, "1min", show(url))
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	q := u.Query()
	q.Set("idle_in_transaction_session_timeout", "5s")
	u.RawQuery = q.Encode()
	assert.Equal(t, "5s", show(u.String()))
}
