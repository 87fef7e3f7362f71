// Down, Purge and Status: what `make down` and `make status` do with the pid files Up wrote.

package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Down stops everything whose pid file is in RunDir/pids (services and their replicas,
// nats-server, a throwaway PostgreSQL) and nothing else.
func Down(o Options) error {
	o.defaults()
	var errs []error
	// The supervisor first, which stops the services it runs (and would restart any stopped
	// behind its back); then any service left, so they drain against a live NATS and
	// database; then nats-server.
	files := []string{o.path("pids", "supervisor.pid")}
	names := append([]string{}, Services...)
	for _, svc := range Services { // "stock-2" and on, whatever REPLICAS up was given
		replicas, _ := filepath.Glob(o.path("pids", svc+"-[0-9]*.pid"))
		for _, f := range replicas {
			name := strings.TrimSuffix(filepath.Base(f), ".pid")
			if _, _, ok := replicaOf(name); ok {
				names = append(names, name)
			}
		}
	}
	names = append(names, "paysim", "console")
	for _, n := range (Options{NATSNodes: clusterNodes}).natsNodes() { // either shape's nodes
		names = append(names, n.name)
	}
	for _, name := range append(names, "redis") {
		files = append(files, o.path("pids", name+".pid"))
	}
	for _, f := range files {
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if pid := readPid(f); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			if !waitGone(pid, 25*time.Second) { // the supervisor waits up to 20 s for a drain
				_ = syscall.Kill(pid, syscall.SIGKILL)
				waitGone(pid, 5*time.Second)
			}
		}
		if err := os.Remove(f); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(o.natsClusterMarker()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
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

// Stop is Down for a System: what this System started, its fronts first.
func (s *System) Stop() error { return errors.Join(s.closeFronts(), Down(s.opts)) }

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

// Status prints which started processes still run — each replica, on its own port, and the
// fronts before them — and where the throwaway cluster lives.
func Status(o Options, w io.Writer) error {
	o.defaults()
	files, _ := filepath.Glob(o.path("pids", "*"))
	if len(files) == 0 {
		fmt.Fprintln(w, "nothing of this checkout runs (make up starts it)")
	}
	supervised := readSupervised(o)
	up, upOK := readSupervisorOptions(o)
	replicated := upOK && up.Replicas > 1
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	files, _ = filepath.Glob(o.path("pids", "*.pid"))
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(filepath.Base(f), ".pid")
	}
	slices.Sort(names) // stock before stock-2
	for _, name := range names {
		pid := readPid(o.path("pids", name+".pid"))
		state := "stopped"
		if pid > 0 && Alive(pid) {
			state = fmt.Sprintf("running (pid %d)", pid)
		}
		rec, ok := supervised[name]
		if ok && rec.URL != "" && replicated { // say which replica is where
			state += " on " + strings.TrimPrefix(rec.URL, "http://")
		}
		if ok && rec.Restarts > 0 {
			state += fmt.Sprintf(", %d restarts, last exit %s at %s", rec.Restarts, rec.LastExit, rec.ExitedAt.Format(time.TimeOnly))
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, state)
	}
	if pid := readPid(o.path("pids", "supervisor.pid")); replicated && pid > 0 && Alive(pid) {
		for _, svc := range Services {
			fmt.Fprintf(tw, "%s front\t127.0.0.1:%d → %s (round robin, in the supervisor)\n", svc, up.Ports[svc],
				strings.Join(replicaNames(svc, up.Replicas), ", "))
		}
	}
	if data, err := os.ReadFile(o.path("pids", "pg.data")); err == nil {
		state := "stopped"
		if postmasterRunning(strings.TrimSpace(string(data))) {
			state = "running"
		}
		fmt.Fprintf(tw, "%s\t%s, throwaway cluster in %s\n", "postgres", state, strings.TrimSpace(string(data)))
	}
	return tw.Flush()
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
