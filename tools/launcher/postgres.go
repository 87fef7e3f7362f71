// The throwaway PostgreSQL cluster: where it lives, how it starts, and the URL Up hands out.

package launcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

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
