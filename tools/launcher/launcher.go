// Package launcher brings stockflow up on one machine — PostgreSQL, the pinned NATS server and
// the four services as separate processes — and takes down exactly what it started. `stockflow
// up` and the end-to-end tests share it, so the tests run the system the way a user does.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stockflow/stockflow/pkg/freeport"
	"github.com/stockflow/stockflow/pkg/postgres"
)

// Services are the four service processes, in start order.
var Services = []string{"stock", "order", "payment-adapter", "timeout"}

// DefaultPorts are the services' default HTTP ports (DESIGN §9).
var DefaultPorts = map[string]int{"order": 8081, "stock": 8082, "payment-adapter": 8083, "timeout": 8084}

var databases = map[string]string{"order": "order", "stock": "stock", "payment-adapter": "payment", "timeout": "timeout"}

// Options say where things go.
type Options struct {
	Root        string         // repository root (for go build)
	RunDir      string         // state, binaries, logs and pid files (.run/)
	DatabaseURL string         // a server URL to use if reachable; empty: start a throwaway cluster
	NATSURL     string         // a NATS >= 2.12 to use; empty: start the pinned nats-server
	RedisURL    string         // the flash-sale gate's Redis if reachable; empty: start a throwaway redis-server; "off": no gate
	PGPort      int            // port of a throwaway cluster (default 15432)
	NATSPort    int            // port of the started nats-server (default 14222; 0 picks a free one)
	NATSNodes   int            // 3: the started nats-servers are a three-node JetStream cluster, streams with 3 replicas (NATS_CLUSTER)
	NATSSync    string         // the started nats-servers' JetStream sync_interval: "always" (default: fsync before every ack) or a Go duration (NATS_SYNC_INTERVAL)
	RedisPort   int            // port of a throwaway redis-server (default 16379)
	PaysimPort  int            // port of paysim, the payment providers' stand-in (default 18083)
	ConsolePort int            // port of the operations console (default DefaultConsolePort; -1 picks a free one)
	Console     bool           // Up starts the operations console too (UpSupervised, `make up`, always does)
	Ports       map[string]int // HTTP ports per service (default DefaultPorts; 0 picks a free one)
	// Replicas is how many processes of each service run (REPLICAS; default 1), against the
	// same databases and streams: the first is named after its service ("stock"), the others
	// "stock-2" and on, each on a port of its own (ReplicaPorts, else a free one) behind a
	// round-robin front on the service's port (replicas.go), run by the process that runs the
	// services. With one, nothing is in front.
	Replicas     int
	ReplicaPorts map[string]int // each replica's own HTTP port, by process name, when Replicas > 1 (0 or none: a free one)
	DBPrefix     string         // database name prefix (default "stockflow_")
	Env          []string       // extra environment for every service (KEY=VALUE)
	// Route, when set, gives the host:port a service reaches a dependency (DepPostgres,
	// DepNATS) at instead of its own: `stockflow chaos` puts a fault-injecting proxy there.
	Route func(svc, dep, hostport string) string `json:"-"`
	Log   func(format string, args ...any)       `json:"-"`
}

// System is what Up started or found.
type System struct {
	opts        Options
	DatabaseURL string              // the server URL (database postgres)
	NATSURL     string              // the NATS URL; of the launcher's own nats-server, with the admin's credentials
	RedisURL    string              // the gate's Redis; "" when the gate is off
	PaysimURL   string              // paysim's control API, once payment-adapter has started
	ConsoleURL  string              // the operations console (decision 0007)
	URLs        map[string]string   // http://host:port per service: its front's with several replicas
	procURLs    map[string]string   // http://host:port per service process (ProcessURL)
	fronts      map[string]*front   // per service, with several replicas, when this process runs them
	procs       map[string]*proc    // per service process
	serviceEnv  map[string][]string // SetServiceEnv's, per service
}

// proc is a started process; exited closes when it has been reaped.
type proc struct {
	cmd    *exec.Cmd
	exited <-chan struct{}
}

// spawn starts cmd in a process group of its own (a Ctrl-C of the caller does not reach it),
// its output appended to RunDir/logs/<name>.log, reaped when it exits — exited closes then —
// and its pid in RunDir/pids/<name>.pid, which Down stops.
func spawn(o Options, name string, cmd *exec.Cmd) (exited <-chan struct{}, err error) {
	logf, err := os.OpenFile(o.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // reap; the exit status is in cmd.ProcessState
	return done, os.WriteFile(o.path("pids", name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

func (o *Options) defaults() {
	if o.PGPort == 0 {
		o.PGPort = 15432
	}
	if o.RedisPort == 0 {
		o.RedisPort = 16379
	}
	if o.PaysimPort == 0 {
		o.PaysimPort = 18083
	}
	if o.Ports == nil {
		o.Ports = DefaultPorts
	}
	if o.ConsolePort == 0 {
		o.ConsolePort = DefaultConsolePort
	}
	if o.NATSSync == "" {
		o.NATSSync = "always"
	}
	o.Replicas = max(o.Replicas, 1)
	if o.DBPrefix == "" {
		o.DBPrefix = "stockflow_"
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

func (o Options) path(parts ...string) string {
	return filepath.Join(append([]string{o.RunDir}, parts...)...)
}

// Up ensures PostgreSQL and NATS, builds the services and starts each as a process (each of its
// Replicas, with the fronts before them) with its log in RunDir/logs, and waits until every
// process's /readyz answers. The services are this process's children and the fronts run in
// it: tests kill and restart them (UpSupervised has a supervisor do it). An Up that fails
// runs Down on its RunDir, so nothing it started outlives it (the logs stay).
func Up(ctx context.Context, o Options) (s *System, err error) {
	o.defaults()
	defer func() {
		if err == nil {
			return
		}
		var stopErr error
		if s != nil {
			stopErr = s.Stop() // its fronts too
		} else {
			stopErr = Down(o) // prepare may fail with nats-server already started
		}
		if stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping what the failed up started: %w", stopErr))
		}
	}()
	if s, err = prepare(ctx, o); err != nil {
		return nil, err
	}
	if err := Build(ctx, o, Services...); err != nil {
		return s, err
	}
	if o.Console {
		if err := build(ctx, o, consolePkg); err != nil {
			return s, err
		}
	}
	for _, name := range s.processes() {
		if err := s.Start(ctx, name); err != nil {
			return s, err
		}
	}
	for _, name := range s.processes() {
		if err := s.waitProcess(ctx, name, 60*time.Second); err != nil {
			return s, err
		}
	}
	if o.Console {
		if s.ConsoleURL, err = startConsole(ctx, s.opts, s.URLs); err != nil {
			return s, err
		}
	}
	return s, nil
}

// prepare makes RunDir's folders and the local identity provider's keys and ensures PostgreSQL
// and NATS: everything the services need before they start.
func prepare(ctx context.Context, o Options) (*System, error) {
	for _, d := range []string{"logs", "bin", "pids"} {
		if err := os.MkdirAll(o.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	s := &System{opts: o, URLs: map[string]string{}, procURLs: map[string]string{}, fronts: map[string]*front{}, procs: map[string]*proc{}}
	if err := EnsureKeys(o); err != nil {
		return nil, err
	}
	var err error
	if s.opts.NATSURL == "" && s.opts.NATSPort == 0 {
		if s.opts.NATSPort, err = freeport.Port(); err != nil {
			return nil, err
		}
	}
	if s.DatabaseURL, err = EnsurePostgres(ctx, o); err != nil {
		return nil, err
	}
	if s.NATSURL, err = ensureNATS(ctx, s.opts); err != nil {
		return nil, err
	}
	if s.RedisURL, err = ensureRedis(ctx, o); err != nil {
		return nil, err
	}
	return s, nil
}

// Build compiles the named service binaries into RunDir/bin.
func Build(ctx context.Context, o Options, services ...string) error {
	o.defaults()
	var pkgs []string
	for _, svc := range services {
		pkgs = append(pkgs, "./services/"+svc+"/cmd/"+svc)
		if svc == "payment-adapter" {
			pkgs = append(pkgs, paysimPkg)
		}
	}
	return build(ctx, o, pkgs...)
}

// build compiles the main packages pkgs (relative to Root) into RunDir/bin, stamped with the
// checkout's commit (workspace builds get no VCS stamp of their own), so /healthz and
// --version say which code runs.
func build(ctx context.Context, o Options, pkgs ...string) error {
	o.Log("building %s", strings.Join(pkgs, ", "))
	args := []string{"build", "-o", o.path("bin") + string(os.PathSeparator)}
	if commit := checkoutCommit(ctx, o.Root); commit != "" {
		args = append(args, "-ldflags", "-X github.com/stockflow/stockflow/pkg/buildinfo.commit="+commit)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkgs...)...)
	cmd.Dir = o.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// checkoutCommit is root's HEAD commit, with "+dirty" when the tree has changes; "" outside a
// git checkout.
func checkoutCommit(ctx context.Context, root string) string {
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	commit := git("rev-parse", "HEAD")
	if commit != "" && git("status", "--porcelain", "--untracked-files=no") != "" {
		commit += "+dirty"
	}
	return commit
}

// ServiceDatabaseURL is the URL of a service's own database on the system's server.
func (s *System) ServiceDatabaseURL(svc string) string {
	u, err := postgres.WithDatabase(s.DatabaseURL, s.opts.DBPrefix+databases[svc])
	if err != nil {
		panic(err) // DatabaseURL was parsed when the server was found
	}
	return u
}

// reserve fixes a service's URL: its configured port, the port of an earlier start, or a
// free one.
func (s *System) reserve(svc string) error {
	if _, ok := s.URLs[svc]; ok {
		return nil // a restart keeps the port
	}
	u, err := localURL(s.opts.Ports[svc])
	if err == nil {
		s.URLs[svc] = u
	}
	return err
}

// localURL is http://127.0.0.1:port, on a free port for 0.
func localURL(port int) (string, error) {
	if port == 0 {
		var err error
		if port, err = freeport.Port(); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port), nil
}

// port is the port of svc's reserved URL.
func (s *System) port(svc string) int { return portOf(s.URLs[svc]) }

// peerURLs is the environment naming the other services a service calls (reconcile jobs).
var peerURLs = map[string][]struct{ env, peer string }{
	"stock":           {{"STOCK_ORDER_URL", "order"}},
	"order":           {{"ORDER_STOCK_URL", "stock"}},
	"payment-adapter": {{"PAYMENT_STOCK_URL", "stock"}},
}

// gated are the services that use the flash-sale gate's Redis: order takes, stock arms and
// reconciles.
var gated = map[string]bool{"order": true, "stock": true}

// Start starts (or restarts) one service process: a service's name is its first replica,
// "stock-2" its second. With several replicas it starts the service's front too, unless that
// runs.
func (s *System) Start(ctx context.Context, name string) error {
	svc, _, ok := replicaOf(name)
	if !ok {
		return fmt.Errorf("start %s: no such service process", name)
	}
	// The peers' addresses are fixed before they start: a service is told them up front.
	if err := s.reserveProcess(name); err != nil {
		return err
	}
	for _, p := range peerURLs[svc] {
		if err := s.reserve(p.peer); err != nil {
			return err
		}
	}
	if err := s.ensureFront(svc); err != nil {
		return err
	}
	addr := strings.TrimPrefix(s.procURLs[name], "http://")
	if err := portFree(addr, 5*time.Second); err != nil { // a killed process may hold it a moment
		return fmt.Errorf("start %s: %s is taken (is stockflow already up? `make down`, or free the port): %w", name, addr, err)
	}
	cmd := exec.Command(s.opts.path("bin", svc), "serve")
	cmd.Env = append(os.Environ(), "HTTP_ADDR="+addr,
		"DATABASE_URL="+s.opts.routed(svc, DepPostgres, s.ServiceDatabaseURL(svc)),
		"NATS_URL="+s.opts.routed(svc, DepNATS, s.serviceNATSURL(svc)))
	if s.opts.NATSURL == "" { // an external NATS's replicas are its operator's (NATS_STREAM_REPLICAS)
		cmd.Env = append(cmd.Env, fmt.Sprintf("NATS_STREAM_REPLICAS=%d", s.opts.streamReplicas()))
	}
	for _, p := range peerURLs[svc] {
		cmd.Env = append(cmd.Env, p.env+"="+s.URLs[p.peer])
	}
	if s.RedisURL != "" && gated[svc] {
		cmd.Env = append(cmd.Env, "REDIS_URL="+s.RedisURL)
	}
	if svc == "payment-adapter" {
		url, env, err := ensurePaysim(ctx, s.opts, s.URLs[svc])
		if err != nil {
			return err
		}
		s.PaysimURL = url
		cmd.Env = append(cmd.Env, env...)
	}
	cmd.Env = append(cmd.Env, s.opts.authEnv(svc)...)
	cmd.Env = append(cmd.Env, s.opts.Env...)
	cmd.Env = append(cmd.Env, s.serviceEnv[svc]...)
	exited, err := spawn(s.opts, name, cmd)
	if exited != nil {
		s.procs[name] = &proc{cmd: cmd, exited: exited}
	}
	return err
}

func portFree(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitReady waits until a service process's /readyz answers 200 ("stock-2"), or, given a
// service's name, every one of its replicas'.
func (s *System) WaitReady(ctx context.Context, name string, timeout time.Duration) error {
	names := []string{name}
	if svc, _, ok := replicaOf(name); ok && svc == name {
		names = s.Replicas(svc)
	}
	for _, n := range names {
		if err := s.waitProcess(ctx, n, timeout); err != nil {
			return err
		}
	}
	return nil
}

// waitProcess waits until process name's own /readyz answers 200.
func (s *System) waitProcess(ctx context.Context, name string, timeout time.Duration) error {
	if err := s.reserveProcess(name); err != nil {
		return err
	}
	var exited <-chan struct{}
	if p := s.procs[name]; p != nil {
		exited = p.exited
	}
	return s.waitURL(ctx, name, s.procURLs[name], timeout, exited)
}

// waitURL waits until process name's /readyz at url answers 200, failing early when exited
// closes (the process that runs it has gone).
func (s *System) waitURL(ctx context.Context, name, url string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("%s exited during start; its log is %s", name, s.opts.path("logs", name+".log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready within %s; its log is %s", name, timeout, s.opts.path("logs", name+".log"))
}

// Kill stops a service process abruptly (SIGKILL), as a crash would: a service's name is its
// first replica, "stock-2" its second.
func (s *System) Kill(name string) error {
	p := s.procs[name]
	if p == nil {
		return fmt.Errorf("%s is not running", name)
	}
	err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
	delete(s.procs, name)
	return err
}
