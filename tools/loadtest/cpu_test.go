package loadtest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A real line: dash copied to a file named "x) R 1 (y z", after a busy loop of 0.4 s, with
// sleep still running as its child. The name imitates the fields that follow it.
const statWithParens = "2980 (x) R 1 (y z) S 2974 2974 32308 0 -1 4194304 130 0 0 0 40 2 0 0 20 0 1 0 303269 2654208 406 " +
	"18446744073709551615 94699038740480 94699038817209 140729628653184 0 0 0 0 6 65536 1 0 0 17 1 0 0 0 0 0 " +
	"94699038846512 94699038851648 94699488325632 140729628658105 140729628658184 140729628658184 140729628659687 0\n"

func TestParseStatCountsFieldsFromTheLastParen(t *testing.T) {
	s, err := parseStat(statWithParens)
	require.NoError(t, err)
	assert.Equal(t, procStat{pid: 2980, ppid: 2974, utime: 40, stime: 2, start: 303269}, s)

	// A real postmaster's line (the throwaway cluster's), with reaped backends' time in
	// cutime and cstime.
	s, err = parseStat("1646 (postgres) S 1 1646 1646 0 -1 4194304 8289 167544 0 0 16 29 1089 411 20 0 1 0 297689 237150208 9826 " +
		"18446744073709551615 94010077511680 94010082968025 140737478030592 0 0 0 0 24129536 84487 1 0 0 17 1 0 0 0 0 0 " +
		"94010085447760 94010085665482 94010458644480 140737478035489 140737478035689 140737478035689 140737478037460 0")
	require.NoError(t, err)
	assert.Equal(t, procStat{pid: 1646, ppid: 1, utime: 16, stime: 29, cutime: 1089, cstime: 411, start: 297689}, s)

	for _, bad := range []string{"", "12 no parens S 1", "12 (short) S 1 2 3", "x (y) S 1 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 0"} {
		_, err := parseStat(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseStatReadsThisProcess(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no /proc")
	}
	require.NoError(t, err)
	s, err := parseStat(string(b))
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), s.pid)
	assert.Equal(t, os.Getppid(), s.ppid)
}

func TestCPUUseTellsRestartsFromFigures(t *testing.T) {
	gone := errors.New("open /proc/9/stat: no such file or directory")
	for _, tc := range []struct {
		name          string
		before, after cpuSample
		want          CPUUse
	}{
		{"ticks are 10 ms", cpuSample{pid: 7, start: 100, ticks: 250}, cpuSample{pid: 7, start: 100, ticks: 1484},
			CPUUse{Name: "p", PID: 7, Ms: 12340, IdleMsPerSec: -1}},
		{"a new pid is a restart, not a negative figure", cpuSample{pid: 7, start: 100, ticks: 9000}, cpuSample{pid: 8, start: 400, ticks: 30},
			CPUUse{Name: "p", PID: 8, IdleMsPerSec: -1, Note: "restarted during the run (pid 7 → 8)"}},
		{"a reused pid is a restart too", cpuSample{pid: 7, start: 100, ticks: 9000}, cpuSample{pid: 7, start: 500, ticks: 9100},
			CPUUse{Name: "p", PID: 7, IdleMsPerSec: -1, Note: "restarted during the run (pid 7 → 7)"}},
		{"gone after", cpuSample{pid: 9, start: 1, ticks: 5}, cpuSample{pid: 9, err: gone},
			CPUUse{Name: "p", PID: 9, IdleMsPerSec: -1, Note: "pid 9 exited during the run"}},
		{"not there before", cpuSample{err: gone}, cpuSample{pid: 9, start: 1, ticks: 5},
			CPUUse{Name: "p", PID: 9, IdleMsPerSec: -1, Note: "not running when the attack began"}},
		{"never measured", cpuSample{err: errors.New("outside")}, cpuSample{err: errors.New("outside")},
			CPUUse{Name: "p", IdleMsPerSec: -1, Note: "not measured (outside)"}},
		{"replicas are one row", cpuSample{pid: 7, start: 100, replicas: []replicaID{{8, 110}}, ticks: 250},
			cpuSample{pid: 7, start: 100, replicas: []replicaID{{8, 110}}, ticks: 350},
			CPUUse{Name: "p ×2", PID: 7, Ms: 1000, IdleMsPerSec: -1}},
		{"a replica restarted voids the row", cpuSample{pid: 7, start: 100, replicas: []replicaID{{8, 110}}, ticks: 250},
			cpuSample{pid: 7, start: 100, replicas: []replicaID{{9, 900}}, ticks: 260},
			CPUUse{Name: "p ×2", PID: 7, IdleMsPerSec: -1, Note: "a replica started, stopped or restarted during the run (pids [8] → [9])"}},
		{"a replica started during the run voids it too", cpuSample{pid: 7, start: 100, ticks: 250},
			cpuSample{pid: 7, start: 100, replicas: []replicaID{{9, 900}}, ticks: 260},
			CPUUse{Name: "p ×2", PID: 7, IdleMsPerSec: -1, Note: "a replica started, stopped or restarted during the run (pids [] → [9])"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, cpuUse("p", tc.before, tc.after))
		})
	}
}

// TestReplicasAreSummedIntoOneRow: the launcher's pid files of a service's replicas (stock.pid,
// stock-2.pid) make one row whose CPU time is both processes'.
func TestReplicasAreSummedIntoOneRow(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	pids := t.TempDir()
	write := func(name string, pid int) {
		require.NoError(t, os.WriteFile(filepath.Join(pids, name), []byte(strconv.Itoa(pid)), 0o644))
	}
	// Two processes whose CPU times are known: this one and its parent (go test's).
	write("stock.pid", os.Getpid())
	stock := Proc{Name: "stock", PID: PIDFile(filepath.Join(pids, "stock.pid")), Replicas: ReplicaPIDFiles(filepath.Join(pids, "stock.pid"))}

	alone := sampleCPU(stock)
	require.NoError(t, alone.err)
	assert.Empty(t, alone.replicas, "no stock-2.pid: one process")

	write("stock-2.pid", os.Getppid())
	parentBefore := readStatT(t, os.Getppid())
	both := sampleCPU(stock)
	require.NoError(t, both.err)
	me, parent := readStatT(t, os.Getpid()), readStatT(t, os.Getppid())
	assert.Equal(t, []replicaID{{parent.pid, parent.start}}, both.replicas)
	assert.GreaterOrEqual(t, both.ticks, alone.ticks+parentBefore.utime+parentBefore.stime, "the second replica's time is added")
	assert.LessOrEqual(t, both.ticks, me.utime+me.stime+parent.utime+parent.stime)
	assert.Equal(t, "stock ×2", cpuUse("stock", both, both).Name)

	write("stock-2.pid", 0x7ffffff0) // a replica that does not run: no figure, and why
	gone := sampleCPU(stock)
	assert.ErrorContains(t, gone.err, "replica pid")
	require.NoError(t, os.WriteFile(filepath.Join(pids, "stock-2.pid"), []byte("x"), 0o644))
	assert.ErrorContains(t, sampleCPU(stock).err, "stock-2.pid")
}

func readStatT(t *testing.T, pid int) procStat {
	t.Helper()
	s, err := readStat(pid)
	require.NoError(t, err)
	return s
}

func TestPerOrderArithmetic(t *testing.T) {
	per, ok := perOrder(13800, 6000)
	assert.True(t, ok)
	assert.InDelta(t, 2.3, per, 1e-9)
	_, ok = perOrder(100, 0)
	assert.False(t, ok, "no orders, no figure")

	assert.InDelta(t, 9000-400*30, aboveIdle(9000, 400, 30*time.Second), 1e-9)
	assert.InDelta(t, 2000/2.3, ordersPerSecOn(2, 0, 2.3), 1e-9)
	assert.InDelta(t, (2000-400)/1.6, ordersPerSecOn(2, 400, 1.6), 1e-9)
	assert.Zero(t, ordersPerSecOn(2, 0, 0))
}

func TestSampleCPUOfThisProcessGrows(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	me := Proc{Name: "me", PID: Self}
	before := sampleCPU(me)
	require.NoError(t, before.err)
	for x, deadline := 0, time.Now().Add(100*time.Millisecond); time.Now().Before(deadline); x++ {
		_ = x * x // burn a few ticks
	}
	u := cpuUse("me", before, sampleCPU(me))
	assert.Empty(t, u.Note)
	assert.GreaterOrEqual(t, u.Ms, 0.0)
	assert.Equal(t, os.Getpid(), u.PID)

	out := sampleCPU(Proc{Name: "pg", NotMeasured: "DATABASE_URL is elsewhere"})
	assert.EqualError(t, out.err, "DATABASE_URL is elsewhere")
}

func TestCPUTable(t *testing.T) {
	r := &Report{
		Accepted: 6000, CPUWindow: 40 * time.Second,
		CPU: []CPUUse{
			{Name: "order", PID: 11, Ms: 4000, IdleMsPerSec: 10}, // 0.667/order; above rest (4000-400)/6000 = 0.6
			{Name: "stock", PID: 12, Ms: 2000, IdleMsPerSec: -1}, // no rest figure
			{Name: "timeout", PID: 13, IdleMsPerSec: -1, Note: "restarted during the run (pid 13 → 14)"},
			{Name: "postgres (all)", PID: 14, Ms: 6000, IdleMsPerSec: 5}, // above (6000-200)/6000
		},
		WALBytes: 6000 * 2048,
	}
	var b strings.Builder
	r.writeCPU(&b)
	out := b.String()
	assert.Regexp(t, `order\s+11\s+4000\s+0.667\s+10.0\s+0.600`, out)
	assert.Regexp(t, `stock\s+12\s+2000\s+0.333\s+n/a\s+n/a`, out)
	assert.Regexp(t, `timeout\s+13\s+restarted during the run \(pid 13 → 14\)`, out)
	assert.Regexp(t, `total\s+12000\s+2.000\s+15.0\s+1.567`, out, "order + postgres above rest: (3600 + 5800) / 6000")
	assert.Contains(t, out, "the total leaves out the processes without a figure")
	assert.Contains(t, out, "= 2048 bytes per order")
	assert.Contains(t, out, "at 2.000 CPU-ms per order")
}
