package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/tools/launcher"
)

// TestNewcomerFromPrivateClone is the newcomer's first minute: a clone in a private (0700)
// folder — a clone under /root, or in a mktemp -d folder — on a machine with no DATABASE_URL
// and no NATS_URL, so `make up` starts its own PostgreSQL cluster and the pinned nats-server.
// One order is placed and paid by hand; stock is killed and its supervisor starts it again;
// `make down` then leaves no process and no port behind.
func TestNewcomerFromPrivateClone(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	private := t.TempDir()
	require.NoError(t, os.Chmod(private, 0o700))
	clone := filepath.Join(private, "stockflow")
	cloneWorkingTree(t, root, clone)

	offset := freeOffset(t)
	env := []string{"STOCKFLOW_PORT_OFFSET=" + strconv.Itoa(offset), "PAYMENT_SANDBOX_SECRET=" + sandboxSecret}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "NATS_URL=") {
			env = append(env, kv)
		}
	}
	makeIn := func(target string) string {
		cmd := exec.Command("make", target)
		cmd.Dir, cmd.Env = clone, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make %s:\n%s", target, out)
		return string(out)
	}
	var clusterDir string // outside the clone when we are root
	t.Cleanup(func() {
		cmd := exec.Command("go", "run", "./tools/cmd/stockflow", "down", "-purge")
		cmd.Dir, cmd.Env = clone, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("down -purge: %v\n%s", err, out)
		}
		if clusterDir != "" {
			assert.NoDirExists(t, clusterDir, "down -purge removes the cluster")
		}
	})

	up := makeIn("up")
	t.Log(up)
	assert.Contains(t, up, fmt.Sprintf("console          http://127.0.0.1:%d", 8085+offset), "up prints the console's address")
	assert.Contains(t, up, "sign-in token    eyJ", "and a token to sign in with")
	pids := readPids(t, clone)
	want := 8
	if _, err := exec.LookPath("redis-server"); err == nil && os.Getenv("REDIS_URL") == "" {
		want++ // up starts a throwaway redis-server for the gate when it can
	}
	require.Len(t, pids, want, "four services, their supervisor, nats-server, paysim, the console (and redis-server)")
	raw, err := os.ReadFile(filepath.Join(clone, ".run", "pids", "pg.data"))
	require.NoError(t, err, "the throwaway cluster is recorded")
	clusterDir = filepath.Dir(strings.TrimSpace(string(raw)))
	status := makeIn("status")
	for name := range pids {
		assert.Regexp(t, name+` +running`, status)
	}
	assert.Regexp(t, `postgres +running`, status)

	// The user's way to a token: the local identity provider `make up` made in the clone.
	tokenIn := func(args ...string) string {
		cmd := exec.Command("go", append([]string{"run", "./tools/cmd/stockflow", "token"}, args...)...)
		cmd.Dir, cmd.Env = clone, env
		out, err := cmd.Output()
		require.NoError(t, err, "stockflow token %v", args)
		return "Bearer " + strings.TrimSpace(string(out))
	}
	ops, buyer := tokenIn("-role", "operator,viewer", "-sub", "alice"), tokenIn("-role", "buyer", "-sub", "newcomer")
	url := func(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port+offset) }
	order, stock, payment := url(8081), url(8082), url(8083)
	c := client{t}
	sku := "NEWCOMER-" + randomHex(3)
	code, body := c.call("POST", stock+"/v1/skus", map[string]any{"sku": sku, "on_hand": 10}, map[string]string{"Authorization": ops})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	code, body = c.call("PUT", order+"/v1/prices/"+sku, map[string]any{"unit_price": 4900, "currency": "CNY"}, map[string]string{"Authorization": ops})
	require.Equal(t, http.StatusOK, code, "%v", body)
	code, body = c.call("POST", order+"/v1/orders", map[string]any{
		"buyer_id": "newcomer", "currency": "CNY", "payment_timeout": "10m",
		"items": []item{{SKU: sku, Qty: 2, UnitPrice: 4900}},
	}, map[string]string{"Idempotency-Key": randomHex(8), "Authorization": buyer})
	require.Equal(t, http.StatusCreated, code, "%v", body)
	id := body["order_id"].(string)
	waitFor := func(want string) {
		require.Eventually(t, func() bool {
			_, o := c.call("GET", order+"/v1/orders/"+id, nil, map[string]string{"Authorization": buyer})
			return o["status"] == want
		}, 30*time.Second, 50*time.Millisecond, "order %s never reached %s", id, want)
	}
	waitFor("awaiting_payment")
	cb := []byte(fmt.Sprintf(`{"provider_txn_id":"txn-%s","order_id":"%s","amount":9800,"currency":"CNY","status":"succeeded"}`, id, id))
	code, body = c.call("POST", payment+"/v1/callbacks/sandbox", cb, map[string]string{"X-Sandbox-Signature": sign(cb)})
	require.Equal(t, http.StatusOK, code, "%v", body)
	waitFor("paid")
	_, s := c.call("GET", stock+"/v1/skus/"+sku, nil, map[string]string{"Authorization": ops})
	assert.Equal(t, []any{10.0, 8.0, 0.0, 2.0}, []any{s["on_hand"], s["available"], s["locked"], s["sold"]}, "%v", s)

	// A crash: the supervisor starts stock again, with its state, and status counts it.
	require.NoError(t, syscall.Kill(pids["stock"], syscall.SIGKILL))
	require.Eventually(t, func() bool {
		resp, err := http.Get(stock + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "stock never came back after SIGKILL")
	_, s = c.call("GET", stock+"/v1/skus/"+sku, nil, map[string]string{"Authorization": ops})
	assert.Equal(t, 2.0, s["sold"], "%v", s)
	assert.Regexp(t, `stock +running \(pid \d+\), 1 restarts, last exit signal: killed`, makeIn("status"))
	// Which code runs: the launcher stamps the checkout's commit into every binary.
	head, err := exec.Command("git", "-C", clone, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	resp, err := http.Get(stock + "/healthz")
	require.NoError(t, err)
	var health struct{ Status, Version, Commit string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&health))
	_ = resp.Body.Close()
	assert.Equal(t, "dev", health.Version)
	assert.True(t, strings.HasPrefix(health.Commit, strings.TrimSpace(string(head))), "healthz commit %q, checkout %s", health.Commit, head)
	restarted := readPids(t, clone)
	assert.NotEqual(t, pids["stock"], restarted["stock"], "a new stock process")
	pids["stock (restarted)"] = restarted["stock"]

	ports := []int{15432 + offset, 14222 + offset, 8081 + offset, 8082 + offset, 8083 + offset, 8084 + offset, 8085 + offset}
	makeIn("down")
	for name, pid := range pids {
		assert.False(t, launcher.Alive(pid), "%s (pid %d) still runs after down", name, pid)
	}
	for _, p := range ports {
		assert.False(t, listening(p), "port %d still listens after down", p)
	}
	left, _ := filepath.Glob(filepath.Join(clone, ".run", "pids", "*"))
	assert.Empty(t, left)
	assert.Contains(t, makeIn("status"), "nothing of this checkout runs")
}

// cloneWorkingTree clones the repository at root into dir, then lays the working tree's
// uncommitted changes over it, so that a developer's run tests what they are about to commit
// (on CI's fresh clone there are none).
func cloneWorkingTree(t *testing.T, root, dir string) {
	git := func(in string, args ...string) []byte {
		cmd := exec.Command("git", args...)
		cmd.Dir = in
		out, err := cmd.Output()
		require.NoError(t, err, "git %v", args)
		return out
	}
	git(root, "clone", "-q", root, dir)
	changed := strings.Fields(string(git(root, "diff", "--name-only", "HEAD")) + " " +
		string(git(root, "ls-files", "-o", "--exclude-standard")))
	for _, f := range changed {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			_ = os.Remove(filepath.Join(dir, f)) // deleted in the working tree
			continue
		}
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
}

// freeOffset is a STOCKFLOW_PORT_OFFSET under which every port `make up` uses is free.
func freeOffset(t *testing.T) int {
	for off := 20000; off < 40000; off += 137 {
		free := true
		for _, p := range []int{15432, 14222, 16379, 18083, 8081, 8082, 8083, 8084, 8085} {
			if listening(p+off) || !bindable(p+off) {
				free = false
				break
			}
		}
		if free {
			return off
		}
	}
	t.Fatal("no free port offset")
	return 0
}

func bindable(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	return l.Close() == nil
}

func readPids(t *testing.T, clone string) map[string]int {
	files, err := filepath.Glob(filepath.Join(clone, ".run", "pids", "*.pid"))
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

func listening(port int) bool {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	c.Close()
	return true
}
