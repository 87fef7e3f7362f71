package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/natsx"
)

// The launcher's nats-server is locked down (natsx.PermissionsOf): RunDir/nats holds its
// configuration (nats.conf, rendered on every up), the passwords of its users (passwords.json,
// made once and kept for the next up; `down -purge` removes them with the store) and its
// JetStream store. Both files are 0600.
func (o Options) natsDir() string { return o.path("nats") }

func (o Options) natsPasswordsFile() string { return filepath.Join(o.natsDir(), "passwords.json") }

// NATSBinary builds the nats-server pinned in pkg/go.mod into RunDir/bin (once).
func NATSBinary(ctx context.Context, o Options) (string, error) {
	bin := o.path("bin", "nats-server")
	mod, _ := os.Stat(filepath.Join(o.Root, "pkg", "go.mod"))
	if st, err := os.Stat(bin); err == nil && (mod == nil || st.ModTime().After(mod.ModTime())) {
		return bin, nil
	}
	o.Log("building the pinned nats-server")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	cmd.Dir = filepath.Join(o.Root, "pkg")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build nats-server: %w\n%s", err, out)
	}
	return bin, nil
}

// ensureNATS returns the admin's URL of a NATS whose streams are ensured. An external NATS
// (o.NATSURL) is used as given, by the services too: its users, if any, are its operator's
// business, and its URL must be allowed to manage streams. Otherwise it starts the pinned
// nats-server locked down, one node or the three of a JetStream cluster (o.NATSNodes), or
// finds those an earlier up started, and returns their URLs with the admin's credentials;
// each service gets its own (serviceNATSURL).
func ensureNATS(ctx context.Context, o Options) (string, error) {
	if o.NATSURL != "" {
		return o.NATSURL, ensureStreams(ctx, o, o.NATSURL)
	}
	passwords, err := natsPasswords(o)
	if err != nil {
		return "", err
	}
	adminURL, err := natsURLs(o, natsx.AdminUser, passwords[natsx.AdminUser])
	if err != nil {
		return "", err
	}
	nodes := o.natsNodes()
	running := 0
	for _, n := range nodes {
		if pid := readPid(o.path("pids", n.name+".pid")); pid > 0 && Alive(pid) {
			running++
		}
	}
	_, err = os.Stat(o.natsClusterMarker())
	sameShape := (err == nil) == (len(nodes) > 1)
	if running == len(nodes) && sameShape {
		// Ours, from an earlier up: it must be the locked-down server of these passwords.
		if err := checkLocked(ctx, adminURL); err != nil {
			return "", fmt.Errorf("nats-server from an earlier up: %w; run `make down` and `make up` again", err)
		}
		return adminURL, ensureStreams(ctx, o, adminURL)
	}
	if running > 0 { // node 0 is "nats" in either shape, so a single server counts here too
		return "", errors.New("an earlier up runs nats-server with another NATS_CLUSTER, or a node of its cluster died; run `make down` first")
	}
	bin, err := NATSBinary(ctx, o)
	if err != nil {
		return "", err
	}
	for _, n := range nodes { // every port before any node starts, so none is left half up
		if err := portFree(fmt.Sprintf("127.0.0.1:%d", n.client), 0); err != nil {
			return "", fmt.Errorf("port %d is taken by another server (another checkout's `make up`? run `make down` there, or set STOCKFLOW_PORT_OFFSET)", n.client)
		}
	}
	for _, n := range nodes {
		conf, err := writeNATSConfig(o, n, nodes, passwords)
		if err != nil {
			return "", err
		}
		if _, err := spawn(o, n.name, exec.Command(bin, "-c", conf)); err != nil {
			return "", err
		}
	}
	if len(nodes) > 1 {
		if err := os.WriteFile(o.natsClusterMarker(), nil, 0o644); err != nil {
			return "", err
		}
	}
	for _, n := range nodes {
		if err := waitListening(n.client); err != nil {
			return "", fmt.Errorf("nats-server %s did not start; see %s", n.name, o.path("logs", n.name+".log"))
		}
	}
	return adminURL, ensureStreams(ctx, o, adminURL)
}

// natsClusterMarker is there while an up's nats-servers are a cluster (Down removes it).
func (o Options) natsClusterMarker() string { return o.path("pids", "nats.cluster") }

// natsNode is one nats-server the launcher runs: its name (pid and log file), client and
// cluster ports and store directory.
type natsNode struct {
	name          string
	client, route int
	storeDir      string
}

// clusterNodes is how many nats-servers NATS_CLUSTER may ask for.
const clusterNodes = 3

// natsNodes are the launcher's nats-servers: one on NATSPort with its store in RunDir/nats,
// or, with NATSNodes 3, a cluster whose node i (0, 1, 2) listens on NATSPort+1000*i for
// clients and NATSPort+1000*i+500 for routes, its store in RunDir/nats/cluster/node-i (apart
// from the single server's: a store does not move between the two).
func (o Options) natsNodes() []natsNode {
	if o.NATSNodes <= 1 {
		return []natsNode{{name: "nats", client: o.NATSPort, storeDir: o.natsDir()}}
	}
	nodes := make([]natsNode, o.NATSNodes)
	for i := range nodes {
		name := "nats"
		if i > 0 {
			name = fmt.Sprintf("nats-%d", i+1)
		}
		nodes[i] = natsNode{name: name, client: o.NATSPort + 1000*i, route: o.NATSPort + 1000*i + 500,
			storeDir: filepath.Join(o.natsDir(), "cluster", fmt.Sprintf("node-%d", i+1))}
	}
	return nodes
}

// natsURLs is the comma-separated client URLs of every node, each with user's credentials
// (the client picks one and moves to another when it fails).
func natsURLs(o Options, user, password string) (string, error) {
	var urls []string
	for _, n := range o.natsNodes() {
		u, err := natsx.WithCredentials(fmt.Sprintf("nats://127.0.0.1:%d", n.client), user, password)
		if err != nil {
			return "", err
		}
		urls = append(urls, u)
	}
	return strings.Join(urls, ","), nil
}

// streamReplicas is the stream replicas of the launcher's nats-servers: one per node.
func (o Options) streamReplicas() int { return max(1, o.NATSNodes) }

// waitListening waits up to about 10 s for something to accept connections on 127.0.0.1:port.
func waitListening(port int) error {
	var err error
	for range 100 {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			return c.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// natsPasswords reads RunDir/nats/passwords.json, first making it with a random password for
// each of natsx.Users (and adding any user the table gained since).
func natsPasswords(o Options) (map[string]string, error) {
	pw, err := readNATSPasswords(o)
	if errors.Is(err, os.ErrNotExist) {
		pw, err = map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	fresh, err := natsx.NewPasswords()
	if err != nil {
		return nil, err
	}
	missing := false
	for _, u := range natsx.Users() {
		if pw[u] == "" {
			pw[u], missing = fresh[u], true
		}
	}
	if !missing {
		return pw, nil
	}
	if err := os.MkdirAll(o.natsDir(), 0o700); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(pw, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(o.natsPasswordsFile(), append(out, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("nats passwords: %w", err)
	}
	return pw, nil
}

// readNATSPasswords reads RunDir/nats/passwords.json.
func readNATSPasswords(o Options) (map[string]string, error) {
	b, err := os.ReadFile(o.natsPasswordsFile())
	if err != nil {
		return nil, err
	}
	pw := map[string]string{}
	if err := json.Unmarshal(b, &pw); err != nil {
		return nil, fmt.Errorf("nats passwords %s: %w", o.natsPasswordsFile(), err)
	}
	return pw, nil
}

// writeNATSConfig writes node n's configuration, RunDir/nats/<name>.conf: it listens on
// 127.0.0.1 only, runs JetStream in its store and knows the users of
// natsx.AuthorizationConfig; in a cluster it routes to the other nodes. A message
// acknowledged to the relay must be on disk before the ack (sync_interval: always; the default
// syncs every 2 minutes, and an OS crash would lose what the outbox already marked published:
// review F6); o.NATSSync other than "always" (a duration, only to measure what that costs)
// syncs on that interval instead. The routes carry no credentials or TLS: they listen on
// 127.0.0.1 only.
func writeNATSConfig(o Options, n natsNode, nodes []natsNode, passwords map[string]string) (string, error) {
	auth, err := natsx.AuthorizationConfig(passwords)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteString("# Written by tools/launcher on every up from pkg/natsx/permissions.go; edits are lost.\n")
	serverName := "stockflow"
	if len(nodes) > 1 {
		serverName = "stockflow-" + n.name
	}
	fmt.Fprintf(&b, "server_name: %s\nlisten: %s\n", natsx.ConfString(serverName), natsx.ConfString(fmt.Sprintf("127.0.0.1:%d", n.client)))
	interval := "always"
	if o.NATSSync != "" && o.NATSSync != "always" {
		interval = natsx.ConfString(o.NATSSync) // quoted: the config lexer reads a bare 2m as 2,000,000
	}
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %s\n  sync_interval: %s\n}\n", natsx.ConfString(n.storeDir), interval)
	if len(nodes) > 1 {
		fmt.Fprintf(&b, "cluster {\n  name: stockflow\n  listen: %s\n  routes: [\n", natsx.ConfString(fmt.Sprintf("127.0.0.1:%d", n.route)))
		for _, peer := range nodes {
			if peer.name != n.name {
				fmt.Fprintf(&b, "    %s\n", natsx.ConfString(fmt.Sprintf("nats-route://127.0.0.1:%d", peer.route)))
			}
		}
		// Clients keep to the URLs they were given (every node's): a server advertising
		// its own address would take them around a proxy placed in between.
		b.WriteString("  ]\n  no_advertise: true\n}\n")
	}
	b.WriteString(auth)
	if err := os.MkdirAll(n.storeDir, 0o700); err != nil {
		return "", err
	}
	conf := o.natsConf(n)
	if err := os.WriteFile(conf, b.Bytes(), 0o600); err != nil {
		return "", err
	}
	return conf, os.Chmod(conf, 0o600) // WriteFile keeps an older file's mode
}

// natsConf is where node n's configuration is written: RunDir/nats/nats.conf for the single
// server, RunDir/nats/<name>.conf for a cluster's node.
func (o Options) natsConf(n natsNode) string {
	if o.NATSNodes <= 1 {
		return filepath.Join(o.natsDir(), "nats.conf")
	}
	return filepath.Join(o.natsDir(), n.name+".conf")
}

// checkLocked says why the server at adminURL is not the locked-down server of these
// credentials: it refuses them, or it requires no authentication at all (started by a
// launcher from before the lockdown).
func checkLocked(ctx context.Context, adminURL string) error {
	nc, _, err := natsx.Connect(ctx, adminURL, "stockflow-launcher")
	if err != nil {
		return fmt.Errorf("it refuses this RunDir's admin credentials: %w", err)
	}
	defer nc.Close()
	if !nc.AuthRequired() {
		return errors.New("it runs without authentication")
	}
	return nil
}

// ensureStreams creates the missing streams as the admin, before any service starts (a
// service user may only check them), and says which existing ones differ from this build's
// configuration: up never changes them; `stockflow streams apply` does.
func ensureStreams(ctx context.Context, o Options, url string) error {
	nc, js, err := natsx.Connect(ctx, url, "stockflow-launcher")
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A cluster just started is ready for the streams once its nodes have elected a meta
	// leader — a request sent before the routes carried its reply's interest may never be
	// answered, so each try has its own second — and the leader has heard from every peer:
	// until then a replicated stream finds "no suitable peers for placement". Both are tried
	// again.
	clustered := o.NATSURL == "" && o.streamReplicas() > 1
	var drifts []string
	for {
		err = nil
		if clustered {
			try, cancelTry := context.WithTimeout(ctx, time.Second)
			_, err = js.AccountInfo(try)
			cancelTry()
		}
		if err == nil {
			if drifts, err = natsx.CreateStreams(ctx, js, o.streamReplicas()); !noPeersYet(err) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nats cluster: not ready for the streams: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	for _, d := range drifts {
		o.Log("nats: stream %s (left as it is; `go run ./tools/cmd/stockflow streams apply` changes it)", d)
	}
	if err != nil {
		return fmt.Errorf("nats streams (the NATS URL's user must be allowed to manage them): %w", err)
	}
	return nil
}

// noPeersYet says whether err is the cluster's "no suitable peers for placement" (the server's
// JSClusterNoPeersErr, 10005; nats.go names no constant for it).
func noPeersYet(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == 10005
}

// NATSAdminURL is the URL, with the admin's credentials, of the NATS that up uses: o.NATSURL
// when set, else the launcher's nats-server on o.NATSPort (its passwords from an earlier up).
func NATSAdminURL(o Options) (string, error) {
	if o.NATSURL != "" {
		return o.NATSURL, nil
	}
	pw, err := readNATSPasswords(o)
	if err != nil {
		return "", fmt.Errorf("the NATS admin's password (is stockflow up? set NATS_URL for another server): %w", err)
	}
	return natsURLs(o, natsx.AdminUser, pw[natsx.AdminUser])
}

// serviceNATSURL is the NATS_URL svc starts with: the launcher's nats-server with svc's own
// user and password, never the admin's; an external NATS as given. When the passwords cannot be
// read it names the user without a password, so the service fails on an authorization error
// (its log says so) rather than running with anyone else's rights.
func (s *System) serviceNATSURL(svc string) string {
	if s.opts.NATSURL != "" {
		return s.NATSURL
	}
	pw, err := readNATSPasswords(s.opts)
	if err != nil {
		s.opts.Log("nats credentials of %s: %v", svc, err)
	}
	u, err := natsURLs(s.opts, svc, pw[svc])
	if err != nil {
		s.opts.Log("nats url of %s: %v", svc, err)
		return ""
	}
	return u
}
