package loadtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// TestPGSharesCountEachProcessOnce: a process in both samples counts what it used between
// them; one that started since (a new pid, or a pid reused by a later process) counts all it
// used; one that ended counts nothing; groups come largest first.
func TestPGSharesCountEachProcessOnce(t *testing.T) {
	before := map[int]pgProc{
		10: {group: "stockflow_order", start: 1, ticks: 100},
		11: {group: "stockflow_stock", start: 1, ticks: 50},
		12: {group: "autovacuum worker", start: 1, ticks: 30}, // ends in the window
		13: {group: "stockflow_order", start: 1, ticks: 70},   // its pid is reused below
	}
	after := map[int]pgProc{
		10: {group: "stockflow_order", start: 1, ticks: 160}, // +60
		11: {group: "stockflow_stock", start: 1, ticks: 54},  // +4
		13: {group: "walwriter", start: 9, ticks: 5},         // a new process: 5
		14: {group: "stockflow_stock", start: 8, ticks: 20},  // a new connection: 20
	}
	assert.Equal(t, []PGShare{
		{Group: "stockflow_order", Ms: 600},
		{Group: "stockflow_stock", Ms: 240},
		{Group: "walwriter", Ms: 50},
	}, pgShares(before, after))
}

// TestPGSampleReadsTheServersProcesses: against the test suite's PostgreSQL, on this machine,
// the sample holds this connection's own backend under its database and the server's
// background processes under their types.
func TestPGSampleReadsTheServersProcesses(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.New(t)
	var db string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	s, err := pgSample(ctx, url)
	require.NoError(t, err)
	groups := map[string]bool{}
	for _, p := range s {
		groups[p.group] = true
		assert.Positive(t, p.start)
	}
	assert.True(t, groups[db], "a client backend of %s in %v", db, groups)
	assert.True(t, groups["checkpointer"], "the checkpointer in %v", groups)

	_, err = pgSample(ctx, "")
	assert.Error(t, err)
}
