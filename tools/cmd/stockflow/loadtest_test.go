package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/tools/launcher"
)

func TestLoadProcsFollowUpsPidFiles(t *testing.T) {
	run, data := t.TempDir(), t.TempDir()
	write := func(path, s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o644)) }
	require.NoError(t, os.MkdirAll(filepath.Join(run, "pids"), 0o755))
	for i, name := range []string{"stock", "order", "payment-adapter", "timeout", "nats", "nats-2", "nats-3", "redis"} {
		write(filepath.Join(run, "pids", name+".pid"), string(rune('1'+i)))
	}
	write(filepath.Join(run, "pids", "nats.cluster"), "3") // the cluster marker, not a node
	write(filepath.Join(run, "pids", "pg.data"), data)     // as up writes it: no newline
	write(filepath.Join(data, "postmaster.pid"), "4242\n"+data+"\n1733390000\n16132\n")

	procs := loadProcs(launcher.Options{RunDir: run})
	var names []string
	pids := map[string]int{}
	for _, p := range procs {
		names = append(names, p.Name)
		assert.Empty(t, p.NotMeasured, p.Name)
		pid, err := p.PID()
		require.NoError(t, err, p.Name)
		pids[p.Name] = pid
	}
	assert.Equal(t, []string{"stock", "order", "payment-adapter", "timeout", "nats", "nats-2", "nats-3", "postgres (all)", "redis", "loadtest (this)"}, names)
	assert.Equal(t, 4242, pids["postgres (all)"], "the postmaster, from the data directory")
	assert.True(t, procs[7].Tree, "postgres counts its backends")
	assert.Equal(t, 5, pids["nats"])
	assert.Equal(t, os.Getpid(), pids["loadtest (this)"])
	alone, err := procs[0].Replicas()
	require.NoError(t, err)
	assert.Empty(t, alone, "stock has no second replica")
	write(filepath.Join(run, "pids", "stock-2.pid"), "77") // REPLICAS=2: the same row, both pids
	replicas, err := procs[0].Replicas()
	require.NoError(t, err)
	assert.Equal(t, []int{77}, replicas)
	require.NoError(t, os.Remove(filepath.Join(run, "pids", "stock-2.pid")))

	// Servers up did not start: not measured, and no Redis row.
	for _, f := range []string{"nats.pid", "nats-2.pid", "nats-3.pid", "redis.pid", "pg.data"} {
		require.NoError(t, os.Remove(filepath.Join(run, "pids", f)))
	}
	names = nil
	for _, p := range loadProcs(launcher.Options{RunDir: run}) {
		names = append(names, p.Name)
		if p.Name == "nats" || p.Name == "postgres (all)" {
			assert.Contains(t, p.NotMeasured, "elsewhere", p.Name)
		}
	}
	assert.Equal(t, []string{"stock", "order", "payment-adapter", "timeout", "nats", "postgres (all)", "loadtest (this)"}, names)
}
