package launcher

import (
	"context"
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

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/freeport"
	"github.com/stockflow/stockflow/pkg/natsx"
)

// natsRunDir is a run directory of the test's own, with nats-server on a free port, and Down
// when the test ends.
func natsRunDir(t *testing.T) (Options, int) {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	port, err := freeport.Port()
	require.NoError(t, err)
	o := Options{Root: root, RunDir: t.TempDir(), NATSPort: port, Log: t.Logf}
	o.defaults()
	for _, d := range []string{"logs", "bin", "pids"} {
		require.NoError(t, os.MkdirAll(o.path(d), 0o755))
	}
	t.Cleanup(func() { assert.NoError(t, Down(o)) })
	return o, port
}

// The pinned nats-server as up starts it: locked down, passwords made once and kept, streams
// ensured by the admin; a service's credentials publish its own events and nothing else.
func TestUpStartsNATSLockedDown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the pinned nats-server")
	}
	ctx := context.Background()
	o, port := natsRunDir(t)

	adminURL, err := ensureNATS(ctx, o)
	require.NoError(t, err)
	for _, f := range []string{"passwords.json", "nats.conf"} {
		st, err := os.Stat(filepath.Join(o.natsDir(), f))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}
	sys := &System{opts: o, NATSURL: adminURL}
	stockURL := sys.serviceNATSURL("stock")
	assert.Contains(t, stockURL, "://stock:")
	assert.NotContains(t, stockURL, strings.Split(strings.TrimPrefix(adminURL, "nats://admin:"), "@")[0], "stock gets its own password")

	plain := "nats://127.0.0.1:" + strconv.Itoa(port)
	_, _, err = natsx.Connect(ctx, plain, "anonymous")
	assert.ErrorContains(t, err, "Authorization Violation", "a connection without credentials")

	nc, stock, err := natsx.Connect(ctx, stockURL, "stock")
	require.NoError(t, err)
	defer nc.Close()
	_, err = natsx.PrepareStreams(ctx, nc, stock, 1)
	require.NoError(t, err, "up created the streams")
	_, err = stock.Publish(ctx, events.SubjectStockLocked, []byte(`{}`))
	require.NoError(t, err, "stock publishes its own events")

	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = stock.Publish(short, events.SubjectPaymentSucceeded, []byte(`{"payment_id":"x","order_id":"o-1"}`))
	assert.Error(t, err, "stock published payment.succeeded")
	payment, err := stock.Stream(ctx, natsx.StreamPayment)
	require.NoError(t, err)
	short, cancel = context.WithTimeout(ctx, time.Second)
	defer cancel()
	assert.Error(t, payment.Purge(short), "stock purged PAYMENT")
	short, cancel = context.WithTimeout(ctx, time.Second)
	defer cancel()
	assert.Error(t, stock.DeleteStream(short, natsx.StreamPayment), "stock deleted PAYMENT")

	anc, admin, err := natsx.Connect(ctx, adminURL, "admin")
	require.NoError(t, err)
	defer anc.Close()
	info, err := admin.Stream(ctx, natsx.StreamPayment)
	require.NoError(t, err, "PAYMENT still exists")
	assert.Zero(t, info.CachedInfo().State.Msgs, "the forged payment.succeeded was stored")

	// The next up, with the server still running and after a down, keeps the passwords.
	again, err := ensureNATS(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, adminURL, again)
	require.NoError(t, Down(o))
	again, err = ensureNATS(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, adminURL, again)
	assert.Equal(t, stockURL, sys.serviceNATSURL("stock"))
}

// A nats-server left running by an up from before the lockdown is refused, not used open.
func TestUpRefusesAnOpenNATSFromAnEarlierUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the pinned nats-server")
	}
	ctx := context.Background()
	o, port := natsRunDir(t)
	bin, err := NATSBinary(ctx, o)
	require.NoError(t, err)
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", o.natsDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait() }()
	require.NoError(t, os.WriteFile(o.path("pids", "nats.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644))
	require.Eventually(t, func() bool { return portFree("127.0.0.1:"+strconv.Itoa(port), 0) != nil }, 10*time.Second, 50*time.Millisecond)

	_, err = ensureNATS(ctx, o)
	assert.ErrorContains(t, err, "runs without authentication")
}

// The deployment's NATS users (deploy/k8s/base/nats/auth.conf) are pkg/natsx's, with each
// password a $<USER>_PASSWORD variable from the Secret: a change to permissions.go that the
// manifests miss fails here.
func TestDeploymentAuthConfIsCurrent(t *testing.T) {
	placeholders := map[string]string{}
	for _, u := range natsx.Users() {
		placeholders[u] = "placeholder-" + u
	}
	want, err := natsx.AuthorizationConfig(placeholders)
	require.NoError(t, err)
	for _, u := range natsx.Users() {
		variable := "$" + strings.ToUpper(strings.ReplaceAll(u, "-", "_")) + "_PASSWORD"
		want = strings.ReplaceAll(want, natsx.ConfString("placeholder-"+u), variable)
	}
	path := filepath.Join("..", "..", "deploy", "k8s", "base", "nats", "auth.conf")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var got, comments []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			comments = append(comments, line)
		} else {
			got = append(got, line)
		}
	}
	if os.Getenv("UPDATE_AUTH_CONF") != "" {
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(append(comments, want), "\n")), 0o644))
		return
	}
	assert.Equal(t, want, strings.Join(got, "\n"), "regenerate deploy/k8s/base/nats/auth.conf: UPDATE_AUTH_CONF=1 go test -run TestDeploymentAuthConfIsCurrent ./launcher")
}

// NATS_CLUSTER=3: up starts three locked-down nodes in one JetStream cluster with every stream
// on all three; a service's URL lists them all, so it keeps publishing when the node leading
// its stream is killed; an up with a node dead refuses to go on half a cluster.
func TestUpStartsAThreeNodeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three pinned nats-servers")
	}
	ctx := context.Background()
	o, _ := natsRunDir(t)
	o.NATSNodes = 3
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range o.natsNodes() {
				b, _ := os.ReadFile(o.path("logs", n.name+".log"))
				t.Logf("%s's log:\n%s", n.name, b)
			}
		}
	})

	adminURL, err := ensureNATS(ctx, o)
	require.NoError(t, err)
	assert.Len(t, strings.Split(adminURL, ","), 3, "the admin's URL lists every node")
	anc, admin, err := natsx.Connect(ctx, adminURL, "admin")
	require.NoError(t, err)
	defer anc.Close()
	stream, err := admin.Stream(ctx, natsx.StreamStock)
	require.NoError(t, err)
	info := stream.CachedInfo()
	assert.Equal(t, 3, info.Config.Replicas)
	require.NotNil(t, info.Cluster)
	assert.Len(t, info.Cluster.Replicas, 2, "a copy on each of the other two nodes")

	sys := &System{opts: o, NATSURL: adminURL}
	nc, stock, err := natsx.Connect(ctx, sys.serviceNATSURL("stock"), "stock")
	require.NoError(t, err)
	defer nc.Close()
	_, err = natsx.PrepareStreams(ctx, nc, stock, 3)
	require.NoError(t, err, "a service finds its streams with 3 replicas")
	_, err = stock.Publish(ctx, events.SubjectStockLocked, []byte(`{}`))
	require.NoError(t, err)

	// SIGKILL the node leading STOCK: a new leader takes over and the next publish is stored.
	var leader natsNode
	for _, n := range o.natsNodes() {
		if "stockflow-"+n.name == info.Cluster.Leader {
			leader = n
		}
	}
	require.NotEmpty(t, leader.name, "leader %q is one of ours", info.Cluster.Leader)
	require.NoError(t, syscall.Kill(readPid(o.path("pids", leader.name+".pid")), syscall.SIGKILL))
	require.Eventually(t, func() bool {
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := stock.Publish(short, events.SubjectStockLocked, []byte(`{}`))
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "publish after the leader died")
	info, err = stream.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), info.State.Msgs, "both acked messages kept")
	assert.NotEqual(t, "stockflow-"+leader.name, info.Cluster.Leader)

	_, err = ensureNATS(ctx, o)
	assert.ErrorContains(t, err, "make down", "up with one node dead")
	require.NoError(t, Down(o))
	for _, n := range o.natsNodes() {
		assert.NoFileExists(t, o.path("pids", n.name+".pid"))
	}
	assert.NoFileExists(t, o.natsClusterMarker())
}

// NATS_SYNC_INTERVAL reaches the config: always (the default) bare, a duration quoted, since
// the config lexer reads a bare 2m as the number 2,000,000.
func TestNATSConfigSyncInterval(t *testing.T) {
	passwords, err := natsx.NewPasswords()
	require.NoError(t, err)
	for _, tc := range []struct{ sync, line string }{
		{"", "  sync_interval: always\n"},
		{"always", "  sync_interval: always\n"},
		{"2m", "  sync_interval: \"2m\"\n"},
	} {
		t.Run(tc.sync, func(t *testing.T) {
			o := Options{RunDir: t.TempDir(), NATSSync: tc.sync}
			conf, err := writeNATSConfig(o, o.natsNodes()[0], o.natsNodes(), passwords)
			require.NoError(t, err)
			b, err := os.ReadFile(conf)
			require.NoError(t, err)
			assert.Contains(t, string(b), tc.line)
		})
	}
}
