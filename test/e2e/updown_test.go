package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/tools/launcher"
)

// TestUpThenDownLeavesNothingBehind runs the `make up` code path on a machine with nothing of
// ours running (no DATABASE_URL: a throwaway cluster; no NATS_URL: the pinned server), then
// `make down`, and checks that no started process and no listening port is left.
func TestUpThenDownLeavesNothingBehind(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	pgPort := freePort(t)
	runDir, err := os.MkdirTemp("", "stockflow-updown-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(runDir) })
	require.NoError(t, os.Chmod(runDir, 0o755)) // the throwaway cluster runs as the postgres user when we are root
	opts := launcher.Options{
		Root: root, RunDir: runDir, PGPort: pgPort,
		Ports:    map[string]int{"order": 0, "stock": 0, "payment-adapter": 0, "timeout": 0},
		DBPrefix: "updown_",
		Env:      []string{"PAYMENT_SANDBOX_SECRET=x"},
		Log:      t.Logf,
	}
	up, err := launcher.Up(context.Background(), opts)
	if up != nil {
		t.Cleanup(func() { _ = up.Stop() })
	}
	require.NoError(t, err)

	pids := readPids(t, opts.RunDir)
	require.Len(t, pids, 5, "four services and nats-server")
	ports := []int{pgPort, natsPort(t, up.NATSURL)}
	for _, u := range up.URLs {
		p, err := strconv.Atoi(u[strings.LastIndex(u, ":")+1:])
		require.NoError(t, err)
		ports = append(ports, p)
	}
	for _, p := range ports {
		assert.True(t, listening(p), "port %d listens while up", p)
	}

	require.NoError(t, launcher.Down(opts))
	for name, pid := range pids {
		assert.False(t, alive(pid), "%s (pid %d) still runs after down", name, pid)
	}
	for _, p := range ports {
		assert.False(t, listening(p), "port %d still listens after down", p)
	}
	left, _ := filepath.Glob(filepath.Join(opts.RunDir, "pids", "*"))
	assert.Empty(t, left)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func natsPort(t *testing.T, url string) int {
	p, err := strconv.Atoi(url[strings.LastIndex(url, ":")+1:])
	require.NoError(t, err)
	return p
}

func readPids(t *testing.T, runDir string) map[string]int {
	files, err := filepath.Glob(filepath.Join(runDir, "pids", "*.pid"))
	require.NoError(t, err)
	out := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		out[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return out
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func listening(port int) bool {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	c.Close()
	return true
}
