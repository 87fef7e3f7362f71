package reconcile_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/pkg/telemetry/metricstest"
)

// TestFindingsAndRepairsReachMetricsPerJob: a check finds two problems, a repair finds and
// repairs them; /metrics counts 4 found and 2 repaired under the job's name, label
// reconcile_job only (job is the scrape target's).
func TestFindingsAndRepairsReachMetricsPerJob(t *testing.T) {
	metricstest.Handler(t)
	pool, _ := pgtest.New(t, reconcile.Schema)
	g := &gateJob{findings: []reconcile.Finding{{Kind: "thing", Detail: "a"}, {Kind: "thing", Detail: "b"}}}
	r, err := reconcile.NewRunner(pool, nil, g.job("metrics_job"), (&gateJob{}).job("clean_job"))
	require.NoError(t, err)
	job := metricstest.Labels{"reconcile_job": "metrics_job"}
	before := metricstest.Get(t)

	ctx := context.Background()
	_, err = r.Run(ctx, "metrics_job", reconcile.Check, "test")
	require.NoError(t, err)
	_, err = r.Run(ctx, "metrics_job", reconcile.Repair, "test")
	require.NoError(t, err)
	_, err = r.Run(ctx, "clean_job", reconcile.Repair, "test")
	require.NoError(t, err)

	after := metricstest.Get(t)
	assert.Equal(t, "COUNTER", after.Type("stockflow_reconcile_found_total"), after.Text)
	assert.Equal(t, before.Value("stockflow_reconcile_found_total", job)+4, after.Value("stockflow_reconcile_found_total", job))
	assert.Equal(t, before.Value("stockflow_reconcile_repaired_total", job)+2, after.Value("stockflow_reconcile_repaired_total", job))
	assert.True(t, after.Has("stockflow_reconcile_found_total", metricstest.Labels{"reconcile_job": "clean_job"}), "a clean run shows 0, not nothing")
	assert.Equal(t, 0.0, after.Value("stockflow_reconcile_found_total", metricstest.Labels{"reconcile_job": "clean_job"}))
	assert.Equal(t, []string{"reconcile_job=clean_job", "reconcile_job=metrics_job"}, after.Series("stockflow_reconcile_found_total"), "label reconcile_job only")
}
