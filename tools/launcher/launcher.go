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
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

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
	PGPort      int            // port of a throwaway cluster (default 15432)
	NATSPort    int            // port of the started nats-server (default 14222; 0 picks a free one)
	Ports       map[string]int // HTTP ports per service (default DefaultPorts; 0 picks a free one)
	DBPrefix    string         // database name prefix (default "stockflow_")
	Env         []string       // extra environment for every service (KEY=VALUE)
	Log         func(format string, args ...any)
}

// System is what Up started or found.
type System struct {
	opts        Options
	DatabaseURL string            // the server URL (database postgres)
	NATSURL     string            // the NATS URL
	URLs        map[string]string // http://host:port per service
	procs       map[string]*proc
}

// proc is a started process; exited closes when it has been reaped.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func (o *Options) defaults() {
	if o.PGPort == 0 {
		o.PGPort = 15432
	}
	if o.Ports == nil {
		o.Ports = DefaultPorts
	}
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

// Up ensures PostgreSQL and NATS, builds the services and starts each as a process with its log
// in RunDir/logs, and waits until every /readyz answers.
func Up(ctx context.Context, o Options) (*System, error) {
	o.defaults()
	for _, d := range []string{"logs", "bin", "pids"} {
		if err := os.MkdirAll(o.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	s := &System{opts: o, URLs: map[string]string{}, procs: map[string]*proc{}}
	var err error
	if s.DatabaseURL, err = EnsurePostgres(ctx, o); err != nil {
		return nil, err
	}
	if s.NATSURL, err = ensureNATS(ctx, o); err != nil {
		return nil, err
	}
	if err := Build(ctx, o, Services...); err != nil {
		return nil, err
	}
	for _, svc := range Services {
		if err := s.Start(ctx, svc); err != nil {
			return s, err
		}
	}
	for _, svc := range Services {
		if err := s.WaitReady(ctx, svc, 60*time.Second); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Build compiles the named service binaries into RunDir/bin.
func Build(ctx context.Context, o Options, services ...string) error {
	o.defaults()
	args := []string{"build", "-o", o.path("bin") + string(os.PathSeparator)}
	for _, svc := range services {
		args = append(args, "./services/"+svc+"/cmd/"+svc)
	}
	o.Log("building %s", strings.Join(services, ", "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
	port := s.opts.Ports[svc]
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return err
		}
	}
	s.URLs[svc] = fmt.Sprintf("http://127.0.0.1:%d", port)
	return nil
}

// peerURLs is the environment naming the other services a service calls (reconcile jobs).
var peerURLs = map[string][]struct{ env, peer string }{
	"stock":           {{"STOCK_ORDER_URL", "order"}},
	"order":           {{"ORDER_STOCK_URL", "stock"}},
	"payment-adapter": {{"PAYMENT_STOCK_URL", "stock"}},
}

// Start starts (or restarts) one service process.
func (s *System) Start(ctx context.Context, svc string) error {
	// The peers' addresses are fixed before they start: a service is told them up front.
	if err := s.reserve(svc); err != nil {
		return err
	}
	for _, p := range peerURLs[svc] {
		if err := s.reserve(p.peer); err != nil {
			return err
		}
	}
	u := s.URLs[svc]
	port, _ := strconv.Atoi(u[strings.LastIndex(u, ":")+1:])
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := portFree(addr, 5*time.Second); err != nil { // a killed process may hold it a moment
		return fmt.Errorf("start %s: %s is taken (is stockflow already up? `make down`, or free the port): %w", svc, addr, err)
	}
	logf, err := os.OpenFile(s.opts.path("logs", svc+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.opts.path("bin", svc), "serve")
	cmd.Env = append(os.Environ(), "HTTP_ADDR="+addr, "DATABASE_URL="+s.ServiceDatabaseURL(svc), "NATS_URL="+s.NATSURL)
	for _, p := range peerURLs[svc] {
		cmd.Env = append(cmd.Env, p.env+"="+s.URLs[p.peer])
	}
	cmd.Env = append(cmd.Env, s.opts.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", svc, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }() // reap
	s.procs[svc] = p
	return os.WriteFile(s.opts.path("pids", svc+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
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

// WaitReady waits until a service's /readyz answers 200.
func (s *System) WaitReady(ctx context.Context, svc string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.URLs[svc] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		var exited chan struct{}
		if p := s.procs[svc]; p != nil {
			exited = p.exited
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("%s exited during start; its log is %s", svc, s.opts.path("logs", svc+".log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready within %s; its log is %s", svc, timeout, s.opts.path("logs", svc+".log"))
}

// Kill stops a service abruptly (SIGKILL), as a crash would.
func (s *System) Kill(svc string) error {
	p := s.procs[svc]
	if p == nil {
		return fmt.Errorf("%s is not running", svc)
	}
	err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
	delete(s.procs, svc)
	return err
}

// Down stops everything whose pid file is in RunDir/pids (services, nats-server, a throwaway
// PostgreSQL) and nothing else.
func Down(o Options) error {
	o.defaults()
	var errs []error
	// Services first, so they drain against a live NATS and database; then nats-server.
	var files []string
	for _, svc := range append(append([]string{}, Services...), "nats") {
		files = append(files, o.path("pids", svc+".pid"))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			if !waitGone(pid, 15*time.Second) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				waitGone(pid, 5*time.Second)
			}
		}
		if err := os.Remove(f); err != nil {
			errs = append(errs, err)
		}
	}
	if data, err := os.ReadFile(o.path("pids", "pg.data")); err == nil {
		if err := pgCtl(context.Background(), strings.TrimSpace(string(data)), "stop", "-m", "fast", "-w"); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, os.Remove(o.path("pids", "pg.data")))
	}
	return errors.Join(errs...)
}

// Stop is Down for a System: what this System started.
func (s *System) Stop() error { return Down(s.opts) }

func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		// A zombie child still answers kill 0; reaped children vanish.
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(b), ") Z ") {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func reachable(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx) == nil
}

// EnsurePostgres returns the URL of a PostgreSQL that answers: o.DatabaseURL when it does,
// else a throwaway cluster under RunDir/pg (initdb + pg_ctl from Debian's postgresql package).
func EnsurePostgres(ctx context.Context, o Options) (string, error) {
	o.defaults()
	if o.DatabaseURL != "" {
		if reachable(ctx, o.DatabaseURL) {
			return o.DatabaseURL, nil
		}
		o.Log("DATABASE_URL %s does not answer; starting a throwaway cluster", o.DatabaseURL)
	}
	own := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", o.PGPort)
	if reachable(ctx, own) {
		return own, nil
	}
	data := o.path("pg")
	for _, d := range []string{"logs", "pids"} { // `stockflow pg` may run before any `up`
		if err := os.MkdirAll(o.path(d), 0o755); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		bin, err := pgBin()
		if err != nil {
			return "", err
		}
		o.Log("initdb %s", data)
		if err := os.MkdirAll(data, 0o700); err != nil {
			return "", err
		}
		if err := chownToPostgres(o.RunDir, data, o.path("logs")); err != nil {
			return "", err
		}
		if out, err := asPostgres(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
			return "", fmt.Errorf("initdb: %w\n%s", err, out)
		}
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=400", o.PGPort, data)
	if err := pgCtl(ctx, data, "start", "-w", "-t", "60", "-l", o.path("logs", "postgres.log"), "-o", opts); err != nil {
		return "", err
	}
	if err := os.WriteFile(o.path("pids", "pg.data"), []byte(data), 0o644); err != nil {
		return "", err
	}
	return own, nil
}

func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL binaries (initdb, pg_ctl) not found: install Debian's 'postgresql' package (apt-get install postgresql), or set DATABASE_URL to a reachable server")
}

func pgCtl(ctx context.Context, data string, args ...string) error {
	bin, err := pgBin()
	if err != nil {
		return err
	}
	if out, err := asPostgres(ctx, filepath.Join(bin, "pg_ctl"), append([]string{"-D", data}, args...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %s: %w\n%s", args[0], err, out)
	}
	return nil
}

// asPostgres runs a PostgreSQL server binary, as the postgres user when we are root: initdb
// and postgres refuse to run as root.
func asPostgres(ctx context.Context, name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.CommandContext(ctx, name, args...)
}

func chownToPostgres(paths ...string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs a postgres user to own the throwaway cluster: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, p := range paths {
		if err := os.Chown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

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

func ensureNATS(ctx context.Context, o Options) (string, error) {
	if o.NATSURL != "" {
		return o.NATSURL, nil
	}
	port := o.NATSPort
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return "", err
		}
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		c.Close()
		return url, nil
	}
	bin, err := NATSBinary(ctx, o)
	if err != nil {
		return "", err
	}
	logf, err := os.Create(o.path("logs", "nats.log"))
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", o.path("nats"), "-n", "stockflow")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start nats-server: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(o.path("pids", "nats.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return "", err
	}
	for range 100 {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			return url, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("nats-server did not start; see %s", o.path("logs", "nats.log"))
}

// Status prints which started processes still run.
func Status(o Options, w interface{ Write([]byte) (int, error) }) error {
	o.defaults()
	files, _ := filepath.Glob(o.path("pids", "*.pid"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		state := "stopped"
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			state = fmt.Sprintf("running (pid %d)", pid)
		}
		fmt.Fprintf(w, "%-16s %s\n", strings.TrimSuffix(filepath.Base(f), ".pid"), state)
	}
	if data, err := os.ReadFile(o.path("pids", "pg.data")); err == nil {
		fmt.Fprintf(w, "%-16s throwaway cluster in %s\n", "postgres", strings.TrimSpace(string(data)))
	}
	return nil
}
