package service

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// claimAged stores a claim of consumer c processed age ago.
func claimAged(t *testing.T, pool *pgxpool.Pool, id string, age time.Duration) {
	t.Helper()
	_, err := pool.Exec(context.Background(),
		`INSERT INTO inbox (consumer, message_id, processed_at) VALUES ('c', $1, now() - $2::interval)`, id, age)
	require.NoError(t, err)
}

func claims(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT message_id FROM inbox ORDER BY processed_at`)
	require.NoError(t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

func TestPruneInboxDeletesOldClaimsAndKeepsFreshOnes(t *testing.T) {
	const day = 24 * time.Hour
	pool, _ := pgtest.New(t, inbox.Schema)
	claimAged(t, pool, "old", 31*day)
	claimAged(t, pool, "recent", 29*day)
	claimAged(t, pool, "fresh", 0)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pruneInbox(pool, 30*day, 50*time.Millisecond, slog.New(slog.DiscardHandler))(ctx) }()
	require.Eventually(t, func() bool { return len(claims(t, pool)) == 2 }, 5*time.Second, 10*time.Millisecond,
		"the first prune runs at once")
	assert.Equal(t, []string{"recent", "fresh"}, claims(t, pool))

	claimAged(t, pool, "aged-meanwhile", 40*day)
	require.Eventually(t, func() bool { return len(claims(t, pool)) == 2 }, 5*time.Second, 10*time.Millisecond,
		"and again every interval")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, []string{"recent", "fresh"}, claims(t, pool), "claims within the retention stay")
}

func TestInboxRetentionCoversTheStreams(t *testing.T) {
	tests := []struct {
		name  string
		value string // INBOX_RETENTION; "" for the default
		ok    bool
	}{
		{"the default keeps claims 30 days", "", true},
		{"0 never prunes", "0s", true},
		{"as long as the event streams keep messages", "336h", true},
		{"shorter than the streams would forget claims of replayable messages", "168h", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validated(t, "INBOX_RETENTION", tc.value)
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, "INBOX_RETENTION")
		})
	}
}
