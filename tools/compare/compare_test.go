package compare

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/freeport"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/tools/launcher"
)

// TestCompareSmallSale is `stockflow compare` in `make test`: a small sale on the three
// designs — a scratch database on the test server, the launcher's own redis-server, and a
// stockflow of its own brought up as the end-to-end tests do — then stockflow's promises, the
// naive designs' arithmetic, and the JSON file as a page reads it, during the run and after.
func TestCompareSmallSale(t *testing.T) {
	sys := upStockflow(t)
	signer, err := sys.Signer()
	require.NoError(t, err)
	require.NotEmpty(t, sys.RedisURL, "the redis-only design needs redis-server (apt-get install redis-server)")

	cfg := Default()
	cfg.Units, cfg.Buyers, cfg.SecondWave, cfg.PayRate = 30, 90, 60, 0.6
	cfg.Deadline, cfg.Arrivals, cfg.Grace, cfg.Settle = 2*time.Second, 500*time.Millisecond, 3*time.Second, 15*time.Second
	cfg.Seed = 7
	cfg.Out = filepath.Join(t.TempDir(), "compare.json")
	cfg.DatabaseURL, cfg.ScratchDB, cfg.RedisURL = pgtest.ServerURL(), "compare_test_"+runName(), sys.RedisURL
	t.Cleanup(func() { dropDatabase(t, cfg.ScratchDB) })
	cfg.OrderURL, cfg.StockURL, cfg.PaymentURL = sys.URLs["order"], sys.URLs["stock"], sys.URLs["payment-adapter"]
	cfg.SandboxSecret, cfg.Signer = sandboxSecret, signer

	live := watchFile(cfg.Out)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg, testWriter{t})
	seen := live.stop()
	require.NotNil(t, rep, "%v", err)
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text))
	t.Logf("\n%s", text.String())
	require.NoError(t, err, "a design did not run, or stockflow broke a promise")

	sf := rep.Design(Stockflow)
	assert.Zero(t, sf.Result.Oversold, "stockflow oversold")
	assert.Zero(t, sf.Result.Stuck, "stockflow left units locked past every deadline")
	assert.Equal(t, sf.paidOrders, sf.Result.Sold, "stock's sold against the order service's paid orders")
	assert.Equal(t, cfg.Units, sf.Result.Sold, "stockflow sells every unit: the unpaid ones, released, go to the second wave")
	assert.Positive(t, sf.Result.SecondWaveSold, "the second wave bought the released units")
	assert.Equal(t, cfg.Units, sf.Result.Sold+sf.Result.Stuck+last(sf).Available, "stock's books at the end")

	for _, name := range []string{SingleColumn, RedisOnly} {
		d := rep.Design(name)
		r := d.Result
		// The buyers' count of units taken against what the counter lost: every decrement is
		// a unit someone paid for or holds unpaid, and the counter shows what is left or,
		// below zero, how far it oversold.
		assert.Equal(t, cfg.Units+r.Oversold, r.Sold+r.Stuck+max(last(d).Available, 0), "%s: sold + stuck + available = units + oversold", name)
		assert.Equal(t, r.Orders, r.Sold+r.Stuck, "%s: every unit taken is paid or stuck", name)
		assert.Equal(t, r.Oversold, max(0, -last(d).Available), "%s: the counter below zero is the oversell", name)
		assert.Positive(t, r.Stuck, "%s: unpaid units never come back", name)
		assert.Zero(t, r.SecondWaveSold, "%s: nothing left for the second wave", name)
		// The second wave finds the counter at or below zero. Whether units were really free
		// then depends on how far the first wave oversold: free are the units beyond the paid.
		if r.Sold < cfg.Units {
			assert.Equal(t, int64(cfg.SecondWave), r.TurnedAway, "%s: the second wave is turned away with %d unpaid units free", name, cfg.Units-r.Sold)
		} else {
			assert.Zero(t, r.TurnedAway, "%s: paid beyond the units: none was free", name)
		}
	}

	// The file a page reads: the final one, and the versions seen while the sale ran.
	raw, err := os.ReadFile(cfg.Out)
	require.NoError(t, err)
	final := checkShape(t, raw)
	assert.Equal(t, true, final["done"])
	assert.Zero(t, seen.broken, "a reader saw a half-written file: %v", seen.firstErr)
	assert.GreaterOrEqual(t, seen.running, 4, "versions with done=false while the sale ran (one every 250 ms)")
	assert.Greater(t, seen.maxSamples, 0, "samples while the sale ran")
}

// TestTruthCountsARefusalOnlyWhileAUnitIsFree pins what "turned away while a unit was free"
// means: a buyer owns a unit from asking until the deadline, or for good once paid.
func TestTruthCountsARefusalOnlyWhileAUnitIsFree(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := &truth{units: 2}
	tr.held(hold{wave: 1, asked: at(0), deadline: at(4), paid: true})
	tr.held(hold{wave: 1, asked: at(1), deadline: at(5)}) // never pays
	tr.held(hold{wave: 2, asked: at(7), deadline: at(11), paid: true})
	for _, tc := range []struct {
		at   float64
		free bool
	}{
		{0.5, true},  // one unit not asked for yet
		{1, false},   // both owned (the second buyer asked then)
		{4.9, false}, // the unpaid buyer's deadline not yet passed
		{5, true},    // passed: the unit is free again
		{7, false},   // the second wave's buyer took it
	} {
		before := tr.tally().refusedWhileFree
		tr.refused(at(tc.at))
		got := tr.tally().refusedWhileFree - before
		assert.Equal(t, tc.free, got == 1, "refused at %.1fs", tc.at)
	}
	tl := tr.tally()
	assert.Equal(t, tally{holds: 3, paid: 2, unpaid: 1, secondWavePaid: 1, refused: 5, refusedWhileFree: 2}, tl)
	assert.Equal(t, at(5), tr.lastDeadline(1))
}

// checkShape parses raw as the console reads it and fails t on any key more or less than the
// documented shape; it returns the top level.
func checkShape(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var top map[string]any
	require.NoError(t, json.Unmarshal(raw, &top))
	keys := func(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
	assert.Equal(t, []string{"buyers", "deadline_ms", "designs", "done", "pay_rate", "second_wave", "started_at", "units"}, keys(top))
	_, err := time.Parse(time.RFC3339, fmt.Sprint(top["started_at"]))
	assert.NoError(t, err, "started_at")
	designs, ok := top["designs"].([]any)
	require.True(t, ok, "designs is a list")
	var names []string
	for _, x := range designs {
		d := x.(map[string]any)
		names = append(names, fmt.Sprint(d["name"]))
		assert.Equal(t, []string{"name", "note", "result", "samples", "title"}, keys(d), "design %v (error: %v)", d["name"], d["error"])
		assert.NotEmpty(t, d["title"])
		assert.NotEmpty(t, d["note"])
		assert.Equal(t, []string{"orders", "oversold", "second_wave_sold", "sold", "stuck", "turned_away"}, keys(d["result"].(map[string]any)))
		samples := d["samples"].([]any)
		assert.NotEmpty(t, samples, "samples of %v", d["name"])
		prev := -1.0
		for _, s := range samples {
			sm := s.(map[string]any)
			assert.Equal(t, []string{"available", "locked", "sold", "t_ms"}, keys(sm))
			assert.GreaterOrEqual(t, sm["t_ms"].(float64), prev, "t_ms goes forward")
			prev = sm["t_ms"].(float64)
		}
	}
	assert.Equal(t, []string{SingleColumn, RedisOnly, Stockflow}, names)
	return top
}

// fileWatch reads the report file every 100 ms as a page would.
type fileWatch struct {
	stopc chan struct{}
	done  chan seen
}

type seen struct {
	running, broken, maxSamples int
	firstErr                    error
}

func watchFile(path string) *fileWatch {
	w := &fileWatch{stopc: make(chan struct{}), done: make(chan seen, 1)}
	go func() {
		var s seen
		defer func() { w.done <- s }()
		for {
			select {
			case <-w.stopc:
				return
			case <-time.After(100 * time.Millisecond):
			}
			raw, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				continue
			}
			var r struct {
				Done    bool `json:"done"`
				Designs []struct {
					Samples []Sample `json:"samples"`
				} `json:"designs"`
			}
			if err == nil {
				err = json.Unmarshal(raw, &r)
			}
			if err != nil {
				s.broken++
				if s.firstErr == nil {
					s.firstErr = err
				}
				continue
			}
			if !r.Done {
				s.running++
				for _, d := range r.Designs {
					s.maxSamples = max(s.maxSamples, len(d.Samples))
				}
			}
		}
	}()
	return w
}

func (w *fileWatch) stop() seen {
	close(w.stopc)
	return <-w.done
}

func last(d *Design) Sample {
	if len(d.Samples) == 0 {
		return Sample{}
	}
	return d.Samples[len(d.Samples)-1]
}

const sandboxSecret = "compare-sandbox-secret"

// upStockflow brings up a stockflow of its own for t, as test/e2e does: its databases on
// the test server under a prefix of their own, free ports, its own nats-server, redis-server
// and paysim, 1 s payment windows allowed; all of it stopped and dropped when t ends.
func upStockflow(t *testing.T) *launcher.System {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	runDir := t.TempDir()
	prefix := "cmp_" + runName() + "_"
	free := func() int {
		p, err := freeport.Port()
		require.NoError(t, err)
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sys, err := launcher.Up(ctx, launcher.Options{
		Root: root, RunDir: runDir, DatabaseURL: pgtest.ServerURL(), DBPrefix: prefix,
		Ports:     map[string]int{"order": 0, "stock": 0, "payment-adapter": 0, "timeout": 0},
		RedisPort: free(), PaysimPort: free(),
		Env: []string{
			"PAYMENT_SANDBOX_SECRET=" + sandboxSecret,
			"ORDER_MIN_PAYMENT_WINDOW=1s",
			"TIMEOUT_SWEEP_INTERVAL=500ms",
		},
		Log: func(f string, a ...any) { t.Logf("up: "+f, a...) },
	})
	t.Cleanup(func() {
		if sys != nil {
			if err := sys.Stop(); err != nil {
				t.Logf("stop: %v", err)
			}
		}
		dropDatabase(t, prefix+"%")
		if t.Failed() {
			dumpLogs(t, runDir)
		}
	})
	require.NoError(t, err, "up")
	return sys
}

// dropDatabase drops the databases on the test server whose names are LIKE pattern.
func dropDatabase(t *testing.T, pattern string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		t.Logf("drop %s: %v", pattern, err)
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE $1`, pattern)
	if err != nil {
		t.Logf("drop %s: %v", pattern, err)
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Logf("drop %s: %v", pattern, err)
	}
	for _, n := range names {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("drop %s: %v", n, err)
		}
	}
}

func dumpLogs(t *testing.T, runDir string) {
	files, _ := filepath.Glob(filepath.Join(runDir, "logs", "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		t.Logf("--- %s (tail)\n%s", filepath.Base(f), strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
