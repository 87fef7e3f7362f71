// Package chaos runs a flash sale on a stockflow of its own while a schedule of faults fires —
// every service SIGKILLed (several times, at random points), nats-server SIGKILLed and
// restarted (in a three-node cluster: a node, then the node leading a stream), PostgreSQL
// crashed and restarted (once briefly, once for longer than a consumer's retry budget),
// latency, connection resets and cuts between a service and NATS or PostgreSQL (toxiproxy,
// in-process), and one service's clock stepped ahead and back — and then checks every promise
// stockflow makes against the databases and streams themselves: no oversell, quantities that
// add up, a ledger that folds to the summary, each lock resolved at most once (a porcupine
// check of every order's history), every order terminal in time, every payment honoured, no
// message applied twice, every outbox row published, no dead letter. `stockflow chaos` and
// `make chaos` run it; its short form runs in `make test`.
package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/stockflow/stockflow/pkg/freeport"
	"github.com/stockflow/stockflow/tools/flashsale"
	"github.com/stockflow/stockflow/tools/launcher"
)

// Config is one chaos run.
type Config struct {
	Root      string    // repository root (the services are built from it)
	RunDir    string    // the run's own state, logs and throwaway PostgreSQL (a fresh folder)
	Long      bool      // the long form: a 5-minute PostgreSQL outage, every service killed three times
	NATSNodes int       // 1, or 3 for a JetStream cluster with 3 replicas per stream
	Seed      uint64    // the schedule's and the buyers' randomness; 0: random
	Progress  io.Writer // the timeline as it happens, and the sale's notes; nil: silent
}

// Event is one line of the fault timeline.
type Event struct {
	At   time.Duration // since the sale opened
	Text string
	Err  string // the step failed (it is a failed check too)
}

// Report is what a run did and found.
type Report struct {
	Seed     uint64
	Long     bool
	Nodes    int
	Timeline []Event
	Injected map[string]int // faults by kind
	Restarts map[string]int // how often the keeper restarted each service (kills included)
	Sale     *flashsale.Report
	SaleErr  string
	Checks   []flashsale.Check
	Duration time.Duration
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return true
		}
	}
	return false
}

type runner struct {
	cfg     Config
	sys     *launcher.System
	proxies *proxies
	start   time.Time
	out     io.Writer

	mu       sync.Mutex
	timeline []Event
	outages  []interval // PostgreSQL, the only nats-server or a service's link to either was down
	bg       sync.WaitGroup
}

type interval struct{ from, to time.Time }

func (r *runner) outage(from, to time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outages = append(r.outages, interval{from, to})
}

// background runs a slow step (a server's start, with crash recovery) beside the schedule,
// and notes when it is done.
func (r *runner) background(what string, f func() error) {
	start := time.Now()
	r.bg.Go(func() {
		if err := f(); err != nil {
			r.failf("  %s did not start: %v", what, err)
			return
		}
		r.notef("  %s is back (its start took %s)", what, time.Since(start).Round(100*time.Millisecond))
	})
}

// downAfter is how long, after t, something an order's progress needs was down (overlapping
// outages count each: a bound, not a measurement).
func (r *runner) downAfter(t time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d time.Duration
	for _, o := range r.outages {
		if o.to.After(t) {
			d += o.to.Sub(later(o.from, t))
		}
	}
	return d
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (r *runner) notef(format string, args ...any) {
	e := Event{At: time.Since(r.start), Text: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	r.timeline = append(r.timeline, e)
	r.mu.Unlock()
	fmt.Fprintf(r.out, "chaos %7s  %s\n", e.At.Round(100*time.Millisecond), e.Text)
}

func (r *runner) failf(format string, args ...any) {
	e := Event{At: time.Since(r.start), Text: fmt.Sprintf(format, args...), Err: "failed"}
	r.mu.Lock()
	r.timeline = append(r.timeline, e)
	r.mu.Unlock()
	fmt.Fprintf(r.out, "chaos %7s  %s (FAILED)\n", e.At.Round(100*time.Millisecond), e.Text)
}

// forms are the short and long runs' sizes: the sale, the part of it faults fall in, and the
// long PostgreSQL outage.
type form struct {
	units, buyers  int
	arrivals, pay  time.Duration
	settle, pgLong time.Duration
}

var (
	shortForm = form{units: 120, buyers: 360, arrivals: 60 * time.Second, pay: 6 * time.Second, settle: 60 * time.Second, pgLong: 12 * time.Second}
	// The long form's outage outlasts a consumer's retry budget for an ordinary failure (about
	// 2.6 minutes, natsx.DefaultMaxDeliver) almost twice.
	longForm = form{units: 600, buyers: 1800, arrivals: 8 * time.Minute, pay: 15 * time.Second, settle: 6 * time.Minute, pgLong: 5 * time.Minute}
)

// Run brings up a stockflow of its own (a throwaway PostgreSQL and nats-server, the four
// services behind proxies), runs the sale and the fault schedule, checks, and takes it all
// down. The error is non-nil when the run could not be made or a check failed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Seed == 0 {
		cfg.Seed = mrand.Uint64()
	}
	if cfg.NATSNodes == 0 {
		cfg.NATSNodes = 1
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	f := shortForm
	if cfg.Long {
		f = longForm
	}
	r := &runner{cfg: cfg, proxies: newProxies(), out: cfg.Progress}
	defer r.proxies.stop()
	opts, err := r.options()
	if err != nil {
		return nil, err
	}
	// The run's PostgreSQL cluster lives outside RunDir when we are root: anything an earlier
	// run left there goes first. A failed run keeps its data (launcher.Down) for a person to read.
	if err := launcher.Purge(opts); err != nil {
		return nil, fmt.Errorf("chaos: clear an earlier run: %w", err)
	}
	var rep *Report
	defer func() {
		down := launcher.Purge
		if rep == nil || rep.Failed() {
			down = launcher.Down
		}
		if err := down(opts); err != nil {
			fmt.Fprintln(r.out, "chaos: down:", err)
		}
	}()
	fmt.Fprintf(r.out, "chaos: seed %d, bringing up a stockflow of its own in %s\n", cfg.Seed, cfg.RunDir)
	if r.sys, err = launcher.Up(ctx, opts); err != nil {
		return nil, fmt.Errorf("chaos: up: %w", err)
	}
	signer, err := r.sys.Signer()
	if err != nil {
		return nil, err
	}
	rng := mrand.New(mrand.NewPCG(cfg.Seed, 1))
	faults := schedule(rng, f.arrivals, cfg.Long, cfg.NATSNodes, f.pgLong)
	rep = &Report{Seed: cfg.Seed, Long: cfg.Long, Nodes: cfg.NATSNodes, Injected: map[string]int{}, Restarts: map[string]int{}}
	for _, ft := range faults {
		rep.Injected[ft.Kind]++
	}

	sale := flashsale.Default()
	sale.OrderURL, sale.StockURL, sale.PaymentURL = r.sys.URLs["order"], r.sys.URLs["stock"], r.sys.URLs["payment-adapter"]
	sale.SandboxSecret, sale.Signer, sale.Seed = sandboxSecret, signer, cfg.Seed
	sale.Units, sale.Buyers, sale.Concurrency = int64(f.units), f.buyers, 16
	sale.ArrivalWindow, sale.PaymentTimeout, sale.SettleTimeout = f.arrivals, f.pay, f.settle
	sale.PayRatio, sale.CancelRatio, sale.RetryRatio, sale.RetryDelay = 0.7, 0.1, 0.3, 2*time.Second
	sale.Gate = false // Redis faults are the gate's own test (test/e2e/gate_test.go)
	sale.ChartPath = filepath.Join(cfg.RunDir, "chaos-water-level.png")

	type saleResult struct {
		rep *flashsale.Report
		err error
	}
	saleDone := make(chan saleResult, 1)
	r.start = time.Now()
	go func() {
		sr, err := flashsale.Run(ctx, sale, io.Discard) // the timeline is the run's progress
		saleDone <- saleResult{sr, err}
	}()
	var res saleResult
	r.drive(ctx, steps(faults), func() bool {
		select {
		case res = <-saleDone:
			return true
		default:
			return false
		}
	}, rep.Restarts)
	rep.Sale = res.rep
	if res.err != nil {
		rep.SaleErr = res.err.Error()
	}
	if rep.Sale == nil {
		rep.Timeline, rep.Duration = r.timeline, time.Since(r.start)
		return rep, fmt.Errorf("chaos: the sale did not run: %v", res.err)
	}
	fmt.Fprintln(r.out, "chaos: the sale is over; checking")
	if err := r.ensureUp(ctx); err != nil {
		r.failf("services back after the sale: %v", err)
	}
	rep.Checks = r.check(ctx, rep)
	rep.Timeline, rep.Duration = r.timeline, time.Since(r.start)
	if rep.Failed() {
		return rep, errors.New("chaos: a check failed")
	}
	return rep, ctx.Err()
}

const sandboxSecret = "chaos-sandbox-secret"

// options are the launcher's: every port free, PostgreSQL and nats-server of the run's own
// (it crashes them), no Redis, every service behind the proxies, and timings that let a
// minute's sale show its timeouts, redeliveries and repairs.
func (r *runner) options() (launcher.Options, error) {
	var ports [4]int
	for i := range ports {
		p, err := freeport.Port()
		if err != nil {
			return launcher.Options{}, err
		}
		ports[i] = p
	}
	return launcher.Options{
		Root: r.cfg.Root, RunDir: r.cfg.RunDir,
		PGPort: ports[0], NATSPort: ports[1], PaysimPort: ports[2], RedisURL: "off", NATSNodes: r.cfg.NATSNodes,
		Ports: map[string]int{"order": 0, "stock": 0, "payment-adapter": 0, "timeout": 0},
		Route: r.proxies.route,
		Env: []string{
			"PAYMENT_SANDBOX_SECRET=" + sandboxSecret,
			"ORDER_MIN_PAYMENT_WINDOW=1s",
			"CONSUMER_ACK_WAIT=5s", // a killed consumer's deliveries come back in 5 s, not 30
			"TIMEOUT_SWEEP_INTERVAL=1s",
			"SHUTDOWN_TIMEOUT=5s",
			// The repair jobs behind the events run often, on anything a few seconds old.
			"RECONCILE_PAID_NOT_SOLD_INTERVAL=5s", "RECONCILE_PAID_NOT_SOLD_AGE=5s",
			"RECONCILE_STUCK_ORDERS_INTERVAL=5s", "RECONCILE_STUCK_ORDERS_GRACE=5s",
			"RECONCILE_ORPHAN_LOCKS_INTERVAL=5s", "RECONCILE_ORPHAN_LOCKS_AGE=10s",
			"RECONCILE_OUTBOX_INTERVAL=5s", "RECONCILE_OUTBOX_AGE=5s",
			// Stock's own sweep behind the timeout service, scaled as the payment window is.
			"RECONCILE_OVERDUE_LOCKS_INTERVAL=5s", "RECONCILE_OVERDUE_LOCKS_GRACE=3s",
		},
		Log: func(f string, a ...any) { fmt.Fprintf(r.out, "chaos: "+f+"\n", a...) },
	}, nil
}

// drive runs the steps at their times and keeps the four services alive as Kubernetes would
// (a dead one — killed, or failed at start while its database was away — is started again
// after a backoff of 1 s doubling to 8 s), until done reports the sale over and every step
// ran.
func (r *runner) drive(ctx context.Context, todo []step, done func() bool, restarts map[string]int) {
	backoff := map[string]time.Duration{}
	nextStart := map[string]time.Time{}
	up := map[string]time.Time{}
	finished := false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for len(todo) > 0 && time.Since(r.start) >= todo[0].At {
			s := todo[0]
			todo = todo[1:]
			err := s.Do(ctx, r)
			if errors.Is(err, errLater) {
				s.At = time.Since(r.start) + 500*time.Millisecond
				i, _ := slices.BinarySearchFunc(todo, s.At, func(x step, at time.Duration) int { return cmp.Compare(x.At, at) })
				todo = slices.Insert(todo, i, s)
				continue
			}
			if err != nil {
				r.failf("%s: %v", s.Text, err)
			} else {
				r.notef("%s", s.Text)
			}
		}
		for _, svc := range launcher.Services {
			if !r.sys.Exited(svc) {
				continue
			}
			now := time.Now()
			if nextStart[svc].IsZero() {
				if time.Since(up[svc]) > 20*time.Second {
					backoff[svc] = 0 // it had been up a while: start over at 1 s
				}
				backoff[svc] = min(max(2*backoff[svc], time.Second), 8*time.Second)
				nextStart[svc] = now.Add(backoff[svc])
				continue
			}
			if now.Before(nextStart[svc]) {
				continue
			}
			nextStart[svc], up[svc] = time.Time{}, now
			restarts[svc]++
			if err := r.sys.Start(ctx, svc); err != nil {
				r.notef("  %s did not start: %v", svc, err)
				continue
			}
			r.notef("  %s started again (restart %d, backoff %s)", svc, restarts[svc], backoff[svc])
		}
		if !finished {
			finished = done()
		}
		if finished && len(todo) == 0 {
			r.bg.Wait()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
