package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheRepositoryIsConsistent runs the check on the real files.
func TestTheRepositoryIsConsistent(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run("../../..", filepath.Join(t.TempDir(), "q.yml"), &out))
	assert.Contains(t, out.String(), "catalogued metrics")
}

func TestAnUnknownMetricFails(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(body), 0o644))
	}
	write("docs/observability.md", "| `stockflow_stock_lock_duration_seconds` | histogram | x | y |\n")
	write("deploy/prometheus/alerts.yml", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: histogram_quantile(0.9, rate(stockflow_stock_lock_duration_seconds_bucket[5m])) > 1\n")
	write("deploy/grafana/d.json", `{"panels":[{"title":"p","targets":[{"expr":"rate(stockflow_stock_lock_duration_seconds_count[$__rate_interval])"}]}]}`)
	require.NoError(t, run(root, "", &strings.Builder{}), "histogram series fold into their metric")

	write("deploy/grafana/d.json", `{"panels":[{"title":"p","targets":[{"expr":"stockflow_stock_lcok_total"}]}]}`)
	err := run(root, "", &strings.Builder{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stockflow_stock_lcok_total")

	write("deploy/grafana/d.json", `{"panels":[{"title":"empty","targets":[]}]}`)
	assert.ErrorContains(t, run(root, "", &strings.Builder{}), `panel "empty" has no query`)
}
