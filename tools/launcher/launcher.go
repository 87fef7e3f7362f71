// Package launcher brings stockflow up on one machine — PostgreSQL, the pinned NATS server and
// the four services as separate processes — and takes down exactly what it started. `stockflow
// up` and the end-to-end tests share it, so the tests run the system the way a user does.
package launcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	NATSURL     string            // the NATS URL; of the launcher's own nats-server, with the admin's credentials
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
	if err := EnsureKeys(o); err != nil {
		return nil, err
	}
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
	cmd.Env = append(os.Environ(), "HTTP_ADDR="+addr, "DATABASE_URL="+s.ServiceDatabaseURL(svc), "NATS_URL="+s.serviceNATSURL(svc))
	for _, p := range peerURLs[svc] {
		cmd.Env = append(cmd.Env, p.env+"="+s.URLs[p.peer])
	}
	cmd.Env = append(cmd.Env, s.opts.authEnv(svc)...)
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
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if pid := readPid(f); pid > 0 {
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
	if b, err := os.ReadFile(o.path("pids", "pg.data")); err == nil {
		if data := strings.TrimSpace(string(b)); postmasterRunning(data) {
			if err := pgCtl(context.Background(), data, "stop", "-m", "fast", "-w"); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, os.Remove(o.path("pids", "pg.data")))
	}
	return errors.Join(errs...)
}

// Purge is Down, then removes the state up kept for next time: the throwaway cluster (outside
// the checkout when we are root) and the NATS store. Logs and binaries stay.
func Purge(o Options) error {
	o.defaults()
	err := Down(o)
	dir, derr := clusterDir(o)
	if derr == nil {
		derr = os.RemoveAll(dir)
	}
	return errors.Join(err, derr, os.RemoveAll(o.path("nats")))
}

// Stop is Down for a System: what this System started.
func (s *System) Stop() error { return Down(s.opts) }

func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !Alive(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// Alive says whether pid runs; a zombie child still answers kill 0, so it counts as gone.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
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
// else this checkout's throwaway cluster (initdb + pg_ctl from Debian's postgresql package) on
// o.PGPort. A port that answers for another cluster — another checkout's `make up` — is an error,
// not a server to share.
func EnsurePostgres(ctx context.Context, o Options) (string, error) {
	o.defaults()
	if o.DatabaseURL != "" {
		if reachable(ctx, o.DatabaseURL) {
			return o.DatabaseURL, nil
		}
		o.Log("DATABASE_URL %s does not answer; starting a throwaway cluster", o.DatabaseURL)
	}
	for _, d := range []string{"logs", "pids"} { // `stockflow pg` may run before any `up`
		if err := os.MkdirAll(o.path(d), 0o755); err != nil {
			return "", err
		}
	}
	dir, err := clusterDir(o)
	if err != nil {
		return "", err
	}
	data := filepath.Join(dir, "data")
	own := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", o.PGPort)
	if !postmasterRunning(data) {
		if portFree(fmt.Sprintf("127.0.0.1:%d", o.PGPort), 0) != nil {
			return "", fmt.Errorf("port %d is taken by another server (another checkout's `make up`? run `make down` there, or set STOCKFLOW_PORT_OFFSET)", o.PGPort)
		}
		if err := startCluster(ctx, o, dir, data); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(o.path("pids", "pg.data"), []byte(data), 0o644); err != nil {
		return "", err
	}
	return own, nil
}

// clusterDir is the folder of this checkout's throwaway cluster: RunDir/pg, or, when we are
// root, a folder outside the checkout. As root the server runs as the postgres user, who cannot
// reach into a private checkout (a clone under /root or in a mktemp -d folder), so the cluster
// lives under that user's home (or the temp dir), one folder per checkout, named by a hash of
// RunDir so that `make down` and `make status` find it again and two checkouts never share one.
func clusterDir(o Options) (string, error) {
	if os.Geteuid() != 0 {
		return o.path("pg"), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return "", fmt.Errorf("running as root needs a postgres user to own the throwaway cluster (PostgreSQL refuses to run as root): %w", err)
	}
	base := u.HomeDir
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		base = os.TempDir()
	}
	abs, err := filepath.Abs(o.RunDir)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(base, "stockflow", hex.EncodeToString(sum[:6])), nil
}

// startCluster initialises the cluster on first use and starts it, its log in dir (the server
// writes it as its own user) and linked from RunDir/logs.
func startCluster(ctx context.Context, o Options, dir, data string) error {
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		o.Log("initdb %s", data)
		if err := os.MkdirAll(data, 0o700); err != nil {
			return err
		}
		// Which checkout the folder serves, for a person who finds it.
		if err := os.WriteFile(filepath.Join(dir, "checkout"), []byte(o.RunDir+"\n"), 0o644); err != nil {
			return err
		}
		if err := chownToPostgres(filepath.Dir(dir), dir, data); err != nil {
			return err
		}
		bin, err := pgBin()
		if err != nil {
			return err
		}
		if out, err := asPostgres(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
			return fmt.Errorf("initdb: %w\n%s", err, out)
		}
	}
	logPath := filepath.Join(dir, "postgres.log")
	if link := o.path("logs", "postgres.log"); link != logPath {
		_ = os.Remove(link)
		if err := os.Symlink(logPath, link); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=400", o.PGPort, data)
	return pgCtl(ctx, data, "start", "-w", "-t", "60", "-l", logPath, "-o", opts)
}

// postmasterRunning says whether the cluster in data runs: its postmaster.pid names a live
// process.
func postmasterRunning(data string) bool {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return err == nil && pid > 0 && Alive(pid)
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

// Status prints which started processes still run, and where the throwaway cluster lives.
func Status(o Options, w io.Writer) error {
	o.defaults()
	files, _ := filepath.Glob(o.path("pids", "*"))
	if len(files) == 0 {
		fmt.Fprintln(w, "nothing of this checkout runs (make up starts it)")
	}
	files, _ = filepath.Glob(o.path("pids", "*.pid"))
	for _, f := range files {
		pid := readPid(f)
		state := "stopped"
		if pid > 0 && Alive(pid) {
			state = fmt.Sprintf("running (pid %d)", pid)
		}
		fmt.Fprintf(w, "%-16s %s\n", strings.TrimSuffix(filepath.Base(f), ".pid"), state)
	}
	if data, err := os.ReadFile(o.path("pids", "pg.data")); err == nil {
		state := "stopped"
		if postmasterRunning(strings.TrimSpace(string(data))) {
			state = "running"
		}
		fmt.Fprintf(w, "%-16s %s, throwaway cluster in %s\n", "postgres", state, strings.TrimSpace(string(data)))
	}
	return nil
}

// readPid is the pid in a pid file; 0 when there is none.
func readPid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
