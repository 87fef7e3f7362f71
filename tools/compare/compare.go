// Package compare runs one small flash sale against three inventory designs side by side —
// the seed article's chart (§三) made live, every figure measured:
//
//   - single-column: a sku(id, stock) table in a scratch PostgreSQL database; a buyer reads the
//     stock, checks it is above zero in code, and runs UPDATE … SET stock = stock - 1 (three
//     statements, no lock state), so concurrent buyers oversell and an unpaid unit never
//     comes back;
//   - redis-only: a Redis key as the only truth, GET, check, DECR: the same two faults;
//   - stockflow: the real system (order, stock, payment-adapter, timeout) through its public
//     APIs: an order locks a unit, a payment sells it, the deadline releases it.
//
// The sale is the same for all three: Units units, a first wave of Buyers buyers (one unit
// each), PayRate of those who get a unit pay within half the payment deadline and the rest
// never do, then, once the first wave's deadlines have passed, a second wave of SecondWave
// buyers who all pay. Each design reports what its own books say over time (samples) and what
// the buyers lived through (result): units sold, oversold, stuck with unpaid buyers, buyers
// turned away while a unit was really free, and what the second wave bought. The report goes
// to a JSON file every quarter second while the sale runs, for a page to draw.
package compare

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/stockflow/stockflow/pkg/auth"
)

// The three designs, by their names in the report.
const (
	SingleColumn = "single-column"
	RedisOnly    = "redis-only"
	Stockflow    = "stockflow"
)

// Config is one comparison. Default returns a sale that takes about half a minute;
// RegisterFlags binds the scenario's fields to flags.
type Config struct {
	Units      int64         // units on sale in each design
	Buyers     int           // first-wave buyers, one unit each
	SecondWave int           // buyers who come after the first wave's deadlines, and all pay
	PayRate    float64       // share of the first wave's buyers who pay for the unit they got
	Deadline   time.Duration // how long a buyer has to pay (stockflow: the SKU's payment window)
	Arrivals   time.Duration // each wave's buyers arrive spread uniformly over this window
	Grace      time.Duration // the second wave comes this long after the first wave's last deadline
	Think      time.Duration // the naive designs' pause between reading the stock and decrementing it
	Settle     time.Duration // how long stockflow's orders get to reach their end once the sale is over
	Seed       uint64        // buyers' arrival times and who pays; 0: random
	Out        string        // the JSON report, rewritten every SampleEvery; empty: none

	// DatabaseURL is a PostgreSQL server (any database on it) where the single-column design
	// makes its scratch database ScratchDB.
	DatabaseURL string
	ScratchDB   string
	// RedisURL is the Redis the redis-only design keeps its counter in (a key of its own).
	RedisURL string
	// The running stockflow: its services' base URLs, the sandbox provider's callback secret
	// and the identity provider that signs the buyers' and the operator's tokens.
	OrderURL, StockURL, PaymentURL string
	SandboxSecret                  string
	Signer                         *auth.Signer

	SampleEvery time.Duration // sampling and report-writing period
	HTTPClient  *http.Client  // nil: one sized for the buyers
}

// Default is the scenario of `stockflow compare`: 100 units, 300 buyers, 60 % pay within a
// 4 s deadline, then 200 more.
func Default() Config {
	return Config{
		Units: 100, Buyers: 300, SecondWave: 200, PayRate: 0.6,
		Deadline: 4 * time.Second, Arrivals: time.Second, Grace: 2 * time.Second,
		Think: 2 * time.Millisecond, Settle: 15 * time.Second,
		Out: ".run/compare.json", ScratchDB: "stockflow_compare",
		SampleEvery: 250 * time.Millisecond,
	}
}

// RegisterFlags binds the scenario's fields to flags on fs, with c's values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Int64Var(&c.Units, "units", c.Units, "units on sale in each design")
	fs.IntVar(&c.Buyers, "buyers", c.Buyers, "first-wave buyers, one unit each")
	fs.IntVar(&c.SecondWave, "second-wave", c.SecondWave, "buyers who come after the first wave's deadlines (they all pay)")
	fs.Float64Var(&c.PayRate, "pay-rate", c.PayRate, "share of the first wave's buyers who pay for the unit they got; the rest never pay")
	fs.DurationVar(&c.Deadline, "deadline", c.Deadline, "time to pay (stockflow: the SKU's payment window, at least the order service's ORDER_MIN_PAYMENT_WINDOW)")
	fs.DurationVar(&c.Arrivals, "arrivals", c.Arrivals, "each wave's buyers arrive spread over this window")
	fs.DurationVar(&c.Grace, "grace", c.Grace, "the second wave comes this long after the first wave's last deadline")
	fs.DurationVar(&c.Think, "think", c.Think, "the naive designs' pause between reading the stock and decrementing it")
	fs.DurationVar(&c.Settle, "settle", c.Settle, "how long stockflow's orders get to reach their end after the sale")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "arrival times and who pays (0: random)")
	fs.StringVar(&c.Out, "out", c.Out, "the JSON report, rewritten every 250 ms while the sale runs (empty: none)")
	fs.StringVar(&c.ScratchDB, "scratch-db", c.ScratchDB, "the single-column design's scratch database")
}

// Validate reports the first unusable field.
func (c Config) Validate() error {
	switch {
	case c.Units < 1:
		return errors.New("units must be >= 1")
	case c.Buyers < 1 || c.SecondWave < 0:
		return errors.New("buyers must be >= 1 and second-wave >= 0")
	case c.PayRate < 0 || c.PayRate > 1:
		return errors.New("pay-rate must be within [0, 1]")
	case c.Deadline < time.Second:
		return errors.New("deadline must be >= 1s (the order service's shortest payment window)")
	case c.Arrivals < 0 || c.Grace < 0 || c.Think < 0 || c.Settle <= 0:
		return errors.New("arrivals, grace and think must be >= 0, settle > 0")
	case c.SampleEvery <= 0:
		return errors.New("the sampling period must be > 0")
	case c.DatabaseURL == "" || c.ScratchDB == "":
		return errors.New("a PostgreSQL server and a scratch database name are required")
	case c.RedisURL == "":
		return errors.New("a Redis URL is required")
	case c.OrderURL == "" || c.StockURL == "" || c.PaymentURL == "" || c.Signer == nil:
		return errors.New("stockflow's order, stock and payment URLs and its token signer are required")
	}
	return nil
}

// buyer is one person of the sale, the same in every design: when they arrive (after their
// wave opens), whether they pay for a unit they get, and how long after getting it.
type buyer struct {
	wave     int // 1 or 2
	n        int // index within the wave
	at       time.Duration
	pays     bool
	payAfter time.Duration
}

// payWithin is the share of the deadline within which a paying buyer pays.
const payWithin = 0.5

// plan draws both waves' buyers from seed.
func plan(c Config, seed uint64) (first, second []buyer) {
	rng := mrand.New(mrand.NewPCG(seed, 0))
	draw := func(wave, n int, payRate float64) []buyer {
		bs := make([]buyer, n)
		for i := range bs {
			bs[i] = buyer{wave: wave, n: i, pays: rng.Float64() < payRate,
				payAfter: time.Duration(rng.Float64() * payWithin * float64(c.Deadline))}
			if c.Arrivals > 0 {
				bs[i].at = time.Duration(rng.Int64N(int64(c.Arrivals)))
			}
		}
		return bs
	}
	return draw(1, c.Buyers, c.PayRate), draw(2, c.SecondWave, 1)
}

// runWave starts each buyer at its arrival time after now and waits for all of them.
func runWave(ctx context.Context, bs []buyer, f func(buyer)) {
	start := time.Now()
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Go(func() {
			if pause(ctx, time.Until(start.Add(b.at))) {
				f(b)
			}
		})
	}
	wg.Wait()
}

// Run runs the three designs side by side, writing the report to cfg.Out as it goes (and
// progress notes to progress), and returns the final report. The error is non-nil when a
// design could not be run, or when stockflow oversold, left units stuck, or sold other than
// what was paid — a defect of the system; the naive designs' overselling is their result.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Seed == 0 {
		cfg.Seed = mrand.Uint64()
	}
	first, second := plan(cfg, cfg.Seed)
	runID := runName()
	rep := newReport(cfg, time.Now())
	logf := func(format string, args ...any) {
		fmt.Fprintf(progress, "compare %6.1fs  %s\n", time.Since(rep.start).Seconds(), fmt.Sprintf(format, args...))
	}
	logf("run %s, seed %d: %d units, %d buyers, %.0f%% pay within %s of a %s deadline, %d more after it",
		runID, cfg.Seed, cfg.Units, cfg.Buyers, 100*cfg.PayRate, time.Duration(payWithin*float64(cfg.Deadline)), cfg.Deadline, cfg.SecondWave)

	writeCtx, stopWriting := context.WithCancel(ctx)
	written := make(chan error, 1)
	go func() { written <- rep.keepWriting(writeCtx, cfg.Out, cfg.SampleEvery) }()

	designs := []struct {
		name string
		run  func(context.Context, *designRun) error
	}{
		{SingleColumn, naive(func(ctx context.Context) (counter, error) {
			return openColumn(ctx, cfg.DatabaseURL, cfg.ScratchDB, "CMP-"+runID)
		})},
		{RedisOnly, naive(func(ctx context.Context) (counter, error) {
			return openCounter(ctx, cfg.RedisURL, "stockflow:compare:"+runID+":stock")
		})},
		{Stockflow, func(ctx context.Context, d *designRun) error { return runStockflow(ctx, d, "CMP-"+runID) }},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(designs))
	for i, ds := range designs {
		d := &designRun{cfg: cfg, rep: rep, design: rep.design(ds.name), first: first, second: second, runID: runID, logf: logf}
		wg.Go(func() {
			err := ds.run(ctx, d)
			if err != nil {
				err = fmt.Errorf("%s: %w", ds.name, err)
				rep.fail(d.design, err)
			}
			errs[i] = err
			logf("%s done", ds.name)
		})
	}
	wg.Wait()
	rep.finish()
	stopWriting()
	err := errors.Join(errs...)
	if werr := <-written; werr != nil {
		err = errors.Join(err, fmt.Errorf("compare: write %s: %w", cfg.Out, werr))
	}
	if defects := rep.Defects(); len(defects) > 0 {
		err = errors.Join(err, fmt.Errorf("compare: stockflow: %v", defects))
	}
	return rep, err
}

// designRun is one design's share of the run: the plan, and its part of the report.
type designRun struct {
	cfg           Config
	rep           *Report
	design        *Design
	first, second []buyer
	runID         string
	logf          func(string, ...any)
}

// sample appends one reading of the design's books.
func (d *designRun) sample(available, locked, sold int64) {
	d.rep.sample(d.design, available, locked, sold)
}

// sampleEvery calls read every SampleEvery until ctx ends, and once more then.
func (d *designRun) sampleEvery(ctx context.Context, read func(context.Context) error) {
	tick := time.NewTicker(d.cfg.SampleEvery)
	defer tick.Stop()
	for {
		if err := read(ctx); err != nil && ctx.Err() == nil {
			d.logf("%s: read its books: %v", d.design.Name, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// naive runs the sale on the counter open makes, and cleans it up after.
func naive(open func(context.Context) (counter, error)) func(context.Context, *designRun) error {
	return func(ctx context.Context, d *designRun) (err error) {
		store, err := open(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, store.close()) }()
		return runNaive(ctx, d, store)
	}
}

// pause waits d (nothing when d <= 0) and reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return ctx.Err() == nil
	}
}

// runName names a run's SKU, row, key and buyers: eight hex digits.
func runName() string { return fmt.Sprintf("%08x", mrand.Uint32()) }
