package loadtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/pkg/postgres"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, what
// sysconf(_SC_CLK_TCK) returns. The kernel fixes it at 100 for user space on every
// architecture Go runs Linux on, whatever CONFIG_HZ is; a constant spares cgo.
const clockTicks = 100

// Proc is a process whose CPU time the load test measures: one row of the CPU table.
type Proc struct {
	Name string
	// PID says which process it is now; it is asked before and after the attack, so a
	// restart shows as another pid. An error: not running.
	PID func() (int, error)
	// Replicas, when set, says which processes are the other replicas of the same service
	// (stock-2 of a `make up REPLICAS=2` system), asked with PID: their times are summed into
	// this one row, named "stock ×2", since the cost of an order is the service's, whichever
	// replica did the work. A replica restarted or gone voids the row's figure, as for PID.
	Replicas func() ([]int, error)
	// Tree adds the process's children: the live ones' times and, through its own
	// cutime+cstime, those of the children it has reaped (PostgreSQL's backends).
	Tree bool
	// NotMeasured says why the process is not measured (an outside PostgreSQL); PID is
	// then not called.
	NotMeasured string
}

// PIDFile is a Proc.PID that reads the first line of file: a launcher pid file, or a data
// directory's postmaster.pid.
func PIDFile(file string) func() (int, error) {
	return func() (int, error) {
		b, err := os.ReadFile(file)
		if err != nil {
			return 0, err
		}
		first, _, _ := strings.Cut(string(b), "\n")
		return strconv.Atoi(strings.TrimSpace(first))
	}
}

// ReplicaPIDFiles is a Proc.Replicas that reads the launcher's pid files of a service's other
// replicas beside file, its first replica's: for pids/stock.pid, pids/stock-2.pid and on, in
// replica order. None: a service of one process.
func ReplicaPIDFiles(file string) func() ([]int, error) {
	base := strings.TrimSuffix(file, ".pid")
	return func() ([]int, error) {
		var pids []int
		for n := 2; ; n++ {
			f := fmt.Sprintf("%s-%d.pid", base, n)
			if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
				return pids, nil
			}
			pid, err := PIDFile(f)()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Base(f), err)
			}
			pids = append(pids, pid)
		}
	}
}

// Self is a Proc.PID for this process: the load generator.
func Self() (int, error) { return os.Getpid(), nil }

// procStat is what the load test reads of one /proc/<pid>/stat line.
type procStat struct {
	pid, ppid                    int
	utime, stime, cutime, cstime int64 // clock ticks
	start                        int64 // starttime, ticks after boot: tells a reused pid apart
}

// parseStat reads a /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so the fields are counted from its last ')'.
func parseStat(line string) (procStat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("stat line without (comm): %.80q", line)
	}
	var s procStat
	var err error
	if s.pid, err = strconv.Atoi(strings.TrimSpace(line[:open])); err != nil {
		return procStat{}, fmt.Errorf("stat line pid: %w", err)
	}
	// f[0] is field 3 (state), so field n is f[n-3].
	f := strings.Fields(line[end+1:])
	if len(f) < 22-2 {
		return procStat{}, fmt.Errorf("stat line of pid %d: %d fields after the name, want >= 20", s.pid, len(f))
	}
	ints := []*int64{&s.utime, &s.stime, &s.cutime, &s.cstime}
	for i, p := range ints {
		if *p, err = strconv.ParseInt(f[14-3+i], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("stat line of pid %d, field %d: %w", s.pid, 14+i, err)
		}
	}
	if s.start, err = strconv.ParseInt(f[22-3], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("stat line of pid %d, starttime: %w", s.pid, err)
	}
	if s.ppid, err = strconv.Atoi(f[4-3]); err != nil {
		return procStat{}, fmt.Errorf("stat line of pid %d, ppid: %w", s.pid, err)
	}
	return s, nil
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(b))
}

// cpuSample is one Proc's CPU time at one moment.
type cpuSample struct {
	pid      int
	start    int64
	replicas []replicaID // the Proc's other replicas, whose ticks are in ticks too
	ticks    int64
	err      error
}

// replicaID tells a process apart from a later one with its pid (starttime).
type replicaID struct {
	pid   int
	start int64
}

// sampleCPU reads p now: its own utime+stime, and with Tree its reaped children's and its
// live children's too.
func sampleCPU(p Proc) cpuSample {
	if p.NotMeasured != "" {
		return cpuSample{err: errors.New(p.NotMeasured)}
	}
	pid, err := p.PID()
	if err != nil {
		return cpuSample{err: err}
	}
	s, err := readStat(pid)
	if err != nil {
		return cpuSample{pid: pid, err: err}
	}
	out := cpuSample{pid: pid, start: s.start, ticks: s.utime + s.stime}
	if p.Replicas != nil {
		pids, err := p.Replicas()
		if err != nil {
			return cpuSample{pid: pid, err: err}
		}
		for _, rp := range pids {
			r, err := readStat(rp)
			if err != nil {
				return cpuSample{pid: pid, err: fmt.Errorf("replica pid %d: %w", rp, err)}
			}
			out.replicas = append(out.replicas, replicaID{r.pid, r.start})
			out.ticks += r.utime + r.stime
		}
	}
	if !p.Tree {
		return out
	}
	out.ticks += s.cutime + s.cstime
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile: its time is in the parent's cutime now, or soon
		}
		if c, err := parseStat(string(b)); err == nil && c.ppid == pid {
			out.ticks += c.utime + c.stime + c.cutime + c.cstime
		}
	}
	return out
}

// CPUUse is one process's CPU time over the measured window.
type CPUUse struct {
	Name string
	PID  int     // the pid after the window
	Ms   float64 // CPU milliseconds (user + system) over the window
	// IdleMsPerSec is its CPU rate while no load was sent, before the attack; -1: not measured.
	IdleMsPerSec float64
	// Note, when set, says why Ms is no figure: not running, not measured, or restarted
	// during the run (a new process's time is not the old one's continued).
	Note string
}

// cpuUse is p's CPU time between two samples; a Proc with replicas is named with their
// number ("stock ×2") and shows its first replica's pid.
func cpuUse(name string, before, after cpuSample) CPUUse {
	u := CPUUse{Name: name, PID: after.pid, IdleMsPerSec: -1}
	if n := len(after.replicas); n > 0 {
		u.Name = fmt.Sprintf("%s ×%d", name, n+1)
	}
	switch {
	case before.err != nil && after.err != nil && before.err.Error() == after.err.Error():
		u.Note = "not measured (" + before.err.Error() + ")"
	case before.err != nil:
		u.Note = "not running when the attack began"
	case after.err != nil:
		u.Note = fmt.Sprintf("pid %d exited during the run", before.pid)
	case before.pid != after.pid || before.start != after.start:
		u.Note = fmt.Sprintf("restarted during the run (pid %d → %d)", before.pid, after.pid)
	case !slices.Equal(before.replicas, after.replicas):
		u.Note = fmt.Sprintf("a replica started, stopped or restarted during the run (pids %v → %v)", replicaPIDs(before), replicaPIDs(after))
	case after.ticks < before.ticks:
		// A Tree's child exited and was not reaped yet: its time left the sum for a moment.
		u.Note = "CPU time went backwards (a child exited unreaped); not measured"
	default:
		u.Ms = ticksToMs(after.ticks - before.ticks)
	}
	return u
}

func replicaPIDs(s cpuSample) []int {
	pids := make([]int, len(s.replicas))
	for i, r := range s.replicas {
		pids[i] = r.pid
	}
	return pids
}

func ticksToMs(ticks int64) float64 { return float64(ticks) * 1000 / clockTicks }

func sampleAll(procs []Proc) []cpuSample {
	out := make([]cpuSample, len(procs))
	for i, p := range procs {
		out[i] = sampleCPU(p)
	}
	return out
}

// uses is each process's CPU time between two sampleAll.
func uses(procs []Proc, from, to []cpuSample) []CPUUse {
	out := make([]CPUUse, len(procs))
	for i, p := range procs {
		out[i] = cpuUse(p.Name, from[i], to[i])
	}
	return out
}

// totalMs is the sum of the uses that are figures.
func totalMs(us []CPUUse) float64 {
	sum := 0.0
	for _, u := range us {
		if u.Note == "" {
			sum += u.Ms
		}
	}
	return sum
}

// perOrder is ms spread over orders; false when there are none.
func perOrder(ms float64, orders int) (float64, bool) {
	if orders <= 0 {
		return 0, false
	}
	return ms / float64(orders), true
}

// aboveIdle is the CPU time over a window of d beyond what idleMsPerSec would have used in
// it anyway: the load's own share.
func aboveIdle(ms, idleMsPerSec float64, d time.Duration) float64 {
	return ms - idleMsPerSec*d.Seconds()
}

// ordersPerSecOn is how many orders per second cores could carry at msPerOrder of CPU each,
// after idleMsPerSec of background: (cores × 1000 ms of CPU per second − idle) ÷ CPU-ms per
// order.
func ordersPerSecOn(cores int, idleMsPerSec, msPerOrder float64) float64 {
	if msPerOrder <= 0 {
		return 0
	}
	return (float64(cores)*1000 - idleMsPerSec) / msPerOrder
}

// walLSN is the server's current WAL insert position, as text for pg_wal_lsn_diff.
func walLSN(ctx context.Context, databaseURL string) (string, error) {
	if databaseURL == "" {
		return "", errors.New("no database URL")
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var lsn string
	err = conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn)
	return lsn, err
}

// autovacuums is how many autovacuum and autoanalyze runs the server's databases have counted
// (pg_stat_all_tables, summed over every database that takes connections).
func autovacuums(ctx context.Context, databaseURL string) (int64, error) {
	if databaseURL == "" {
		return 0, errors.New("no database URL")
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate")
	if err != nil {
		return 0, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	var total int64
	for _, name := range names {
		u, err := postgres.WithDatabase(databaseURL, name)
		if err != nil {
			return 0, err
		}
		n, err := func() (int64, error) {
			c, err := pgx.Connect(ctx, u)
			if err != nil {
				return 0, err
			}
			defer c.Close(context.Background())
			var n int64
			err = c.QueryRow(ctx, "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint FROM pg_stat_all_tables").Scan(&n)
			return n, err
		}()
		if err != nil {
			return 0, fmt.Errorf("autovacuum runs in %s: %w", name, err)
		}
		total += n
	}
	return total, nil
}

// walSince is how many WAL bytes the server wrote since the position from.
func walSince(ctx context.Context, databaseURL, from string) (int64, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint", from).Scan(&n)
	return n, err
}
