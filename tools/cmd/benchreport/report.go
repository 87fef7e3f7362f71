package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	//lint:ignore SA1019 the old benchstat is the one with a library API for the old/new table; its successor is a command
	"golang.org/x/perf/benchstat"
	//lint:ignore SA1019 benchstat's Collection reads its records
	oldfmt "golang.org/x/perf/storage/benchfmt"
)

// result is one benchmark line of interest.
type result struct {
	bench              string // LockHotSKU or LockZipf
	path               string // naive or engine
	clients            int
	iters              int
	locksPerSec, p99ms float64
}

// parse reads go test -bench output and keeps the Lock* lines that report locks/s; malformed
// benchmark lines are reported on warn and skipped.
func parse(r io.Reader, warn io.Writer) ([]result, error) {
	br := benchfmt.NewReader(r, "stdin")
	var out []result
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.SyntaxError:
			fmt.Fprintln(warn, "benchreport: skipped:", rec)
		case *benchfmt.Result:
			if res, ok := fromBenchfmt(rec); ok {
				out = append(out, res)
			}
		}
	}
	return out, br.Err()
}

// fromBenchfmt reads the name Lock<X>/<path>/clients=<n>[-procs] and the two custom metrics.
func fromBenchfmt(rec *benchfmt.Result) (result, bool) {
	base, parts := rec.Name.Parts()
	res := result{bench: string(base), iters: rec.Iters}
	for _, p := range parts {
		s := string(p)
		if n, ok := strings.CutPrefix(s, "/clients="); ok {
			res.clients, _ = strconv.Atoi(n)
		} else if res.path == "" && strings.HasPrefix(s, "/") {
			res.path = s[1:]
		}
	}
	var ok1, ok2 bool
	res.locksPerSec, ok1 = rec.Value("locks/s")
	res.p99ms, ok2 = rec.Value("p99-ms")
	return res, ok1 && ok2 && res.path != "" && res.clients > 0
}

// writeTable prints benchstat's two-configuration table (old = naive, new = engine) for
// locks/s and p99-ms, one row per benchmark and clients value. The deprecated benchstat
// package is the one that lays out such a table; cmd/benchstat's own is internal.
func writeTable(w io.Writer, results []result) {
	byPath := map[string][]*oldfmt.Result{}
	for _, r := range results {
		line := fmt.Sprintf("Benchmark%s/clients=%d %d %s locks/s %s p99-ms", r.bench, r.clients, r.iters,
			strconv.FormatFloat(r.locksPerSec, 'g', -1, 64), strconv.FormatFloat(r.p99ms, 'g', -1, 64))
		byPath[r.path] = append(byPath[r.path], &oldfmt.Result{Content: line})
	}
	var c benchstat.Collection
	c.AddResults("naive", byPath["naive"])
	c.AddResults("engine", byPath["engine"])
	fmt.Fprintln(w, "old = naive (conditional UPDATE + ledger row, one transaction per order), new = engine")
	benchstat.FormatText(w, c.Tables())
}

// ratio is one "engine/naive" line: mean engine locks/s over mean naive locks/s, with its
// spread: the lowest and highest of the pairs' ratios (the i-th engine result over the i-th
// naive one, which scripts/bench.sh runs in the same round, back to back), and each side's
// lowest and highest locks/s.
type ratio struct {
	label         string // hot-sku or zipf
	clients       int
	value         float64
	pairs         int // results paired into per-round ratios
	lo, hi        float64
	naive, engine spread
	err           error // one side has no results
}

// spread is the lowest and highest of some figures.
type spread struct{ lo, hi float64 }

func (r ratio) String() string {
	if r.err != nil {
		return fmt.Sprintf("%s engine/naive clients=%d: n/a (%v)", r.label, r.clients, r.err)
	}
	return fmt.Sprintf("%s engine/naive clients=%d: %.1fx (per round %.1f–%.1fx over %d; naive %.0f–%.0f locks/s, engine %.0f–%.0f)",
		r.label, r.clients, r.value, r.lo, r.hi, r.pairs, r.naive.lo, r.naive.hi, r.engine.lo, r.engine.hi)
}

// wanted are the benchmarks and clients values issue 5 asks a ratio for.
var wanted = []struct {
	bench, label string
	clients      []int
}{
	{"LockHotSKU", "hot-sku", []int{1, 8, 64, 256}},
	{"LockZipf", "zipf", []int{64}},
}

// ratios returns one line per wanted clients value, and per other clients value the input has.
func ratios(results []result) []ratio {
	var out []ratio
	for _, w := range wanted {
		clients := slices.Clone(w.clients)
		for _, r := range results {
			if r.bench == w.bench && !slices.Contains(clients, r.clients) {
				clients = append(clients, r.clients)
			}
		}
		slices.Sort(clients)
		for _, n := range clients {
			naive := locksPerSec(results, w.bench, "naive", n)
			engine := locksPerSec(results, w.bench, "engine", n)
			r := ratio{label: w.label, clients: n}
			if len(naive) == 0 || len(engine) == 0 || mean(naive) == 0 {
				r.err = fmt.Errorf("%s clients=%d: %d naive and %d engine results", w.bench, n, len(naive), len(engine))
				out = append(out, r)
				continue
			}
			r.value = mean(engine) / mean(naive)
			r.pairs = min(len(naive), len(engine))
			per := make([]float64, r.pairs)
			for i := range per {
				per[i] = engine[i] / naive[i]
			}
			r.lo, r.hi = slices.Min(per), slices.Max(per)
			r.naive, r.engine = spread{slices.Min(naive), slices.Max(naive)}, spread{slices.Min(engine), slices.Max(engine)}
			out = append(out, r)
		}
	}
	return out
}

// locksPerSec is the locks/s of every run of one benchmark, in the order they ran.
func locksPerSec(results []result, bench, path string, clients int) []float64 {
	var out []float64
	for _, r := range results {
		if r.bench == bench && r.path == path && r.clients == clients {
			out = append(out, r.locksPerSec)
		}
	}
	return out
}

func mean(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}
