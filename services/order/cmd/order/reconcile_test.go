package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/reconcile"
)

// `order reconcile <job|all> [--repair]` prints the JSON report of each run.
func TestReconcileCommand(t *testing.T) {
	_, dbURL := pgtest.New(t)
	environ := []string{"DATABASE_URL=" + dbURL, "NATS_URL=" + natstest.Start(t)}
	ctx := context.Background()
	require.NoError(t, run(ctx, []string{"migrate"}, environ, io.Discard))

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"reconcile", "all"}, environ, &out))
	var all []reconcile.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &all), out.String())
	require.Len(t, all, 2)
	assert.Equal(t, []string{"stuck_orders", reconcile.OutboxJobName}, []string{all[0].Job, all[1].Job})
	for _, r := range all {
		assert.Equal(t, reconcile.Check, r.Mode)
		assert.Equal(t, "cli", r.Trigger)
	}

	out.Reset()
	require.NoError(t, run(ctx, []string{"reconcile", "--repair", "stuck_orders"}, environ, &out))
	var one reconcile.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &one), out.String())
	assert.Equal(t, reconcile.Repair, one.Mode)
	assert.Equal(t, all[1].ID+1, one.ID, "every run is stored")

	assert.ErrorContains(t, run(ctx, []string{"reconcile"}, environ, io.Discard), "name a job")
	assert.ErrorIs(t, run(ctx, []string{"reconcile", "nope"}, environ, io.Discard), reconcile.ErrUnknownJob)
	assert.ErrorContains(t, run(ctx, []string{"reconcile", "a", "b"}, environ, io.Discard), "one job at a time")
}
