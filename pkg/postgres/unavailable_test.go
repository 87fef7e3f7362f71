package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// Against a real server: a refused connection and a session the server ends are outages; a
// statement that fails is not.
func TestIsUnavailable(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.New(t)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = pgx.Connect(ctx, "postgres://postgres@"+closed+"/postgres?connect_timeout=2")
	require.Error(t, err)
	assert.True(t, postgres.IsUnavailable(fmt.Errorf("lock: %w", err)), "refused: %v", err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var pid int
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	_, err = pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT 1")
	require.Error(t, err)
	assert.True(t, postgres.IsUnavailable(err), "terminated: %v", err)

	_, err = pool.Exec(ctx, "SELECT 1/0")
	require.Error(t, err)
	assert.False(t, postgres.IsUnavailable(err), "a failed statement: %v", err)
	_, err = pool.Exec(ctx, "SELECT * FROM no_such_table")
	assert.False(t, postgres.IsUnavailable(err), "%v", err)
	assert.False(t, postgres.IsUnavailable(errors.New("order total negative")))
	assert.False(t, postgres.IsUnavailable(nil))
}
