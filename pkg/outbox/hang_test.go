package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// TestAPassStuckOnADeadConnectionGivesUp: the relay's database connection stops answering
// mid-pass without being reset (a peer gone silently: a toxiproxy dropping everything both
// ways). The pass fails at PassTimeout instead of holding the relay forever, and once the
// network is back the next pass publishes on a fresh connection. (Found by the chaos run: a
// stock service stalled for a minute after its PostgreSQL connections were reset.)
func TestAPassStuckOnADeadConnectionGivesUp(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	direct, dbURL := pgtest.New(t, outbox.Schema)
	proxy, proxiedURL := pgtest.Proxied(t, dbURL)
	pool, err := pgxpool.New(ctx, proxiedURL)
	require.NoError(t, err)
	defer pool.Close()

	r := outbox.NewRelay(pool, e.js, outbox.RelayOptions{PassTimeout: 500 * time.Millisecond})
	write(t, direct, msg("before"))
	assert.Equal(t, 1, publishAll(t, r, direct))

	for _, stream := range []string{"upstream", "downstream"} {
		_, err := proxy.Toxics.AddToxicJson(strings.NewReader(`{"name":"cut-` + stream + `","type":"timeout","stream":"` + stream + `","attributes":{"timeout":0}}`))
		require.NoError(t, err)
	}
	write(t, direct, msg("during"))
	done := make(chan error, 1)
	go func() { _, err := r.PublishPending(ctx); done <- err }()
	select {
	case err := <-done:
		assert.Error(t, err, "a pass on a connection that never answers fails")
	case <-time.After(30 * time.Second):
		t.Fatal("the pass is still stuck on the dead connection")
	}

	for _, stream := range []string{"upstream", "downstream"} {
		require.NoError(t, proxy.Toxics.RemoveToxic(ctx, "cut-"+stream))
	}
	assert.Equal(t, 1, publishAll(t, r, direct), "the row written during the cut is published once the network is back")
}
