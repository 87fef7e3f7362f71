// Package loadtest drives a running stockflow through POST /v1/orders at a fixed rate with the
// vegeta load generator, on one hot SKU with stock for every order, from enough buyers that
// none is rate-limited, and reports what it measured: orders accepted per second, answers by
// status, the time from POST to awaiting_payment (the order's own history against vegeta's
// request time), the stock service's peak RSS, the CPU time each process spent per accepted
// order and the WAL bytes PostgreSQL wrote per order, and whether the stock still adds up.
//
// All of it goes through the public APIs (tools/flashsale's client), so it works against any
// deployment by URL; only the peak RSS and the CPU times need the processes on this machine.
package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/tools/flashsale"
)

// Config is one load test. Default returns issue 5's: 3,000 orders/s for 60 s.
type Config struct {
	OrderURL string // order service base URL
	StockURL string // stock service base URL

	Rate     int           // POST /v1/orders per second, held by vegeta's constant pacer
	Duration time.Duration // how long to attack
	SKU      string        // the hot SKU; empty: LOAD-<random>, created for this run
	Units    int64         // units the SKU must have available first (created or restocked); 0: Rate × Duration, one per order

	// BuyerRate is how many orders per second one buyer places: the orders go in turn to
	// Rate/BuyerRate buyers (rounded up), so each stays under the order service's per-buyer
	// limit (ORDER_RATE_PER_BUYER, default 5/s).
	BuyerRate float64

	Timeout    time.Duration // per request
	MaxWorkers uint64        // most requests in flight; a saturated system then gets fewer than Rate (reported)
	Grace      time.Duration // after the attack, how long orders may take to leave pending
	StockPID   int           // the stock service's process, for its peak RSS; 0: not measured
	Signer     *auth.Signer  // mints the buyer's and the staff's bearer tokens; nil: none

	// Procs are the processes whose CPU time per accepted order the report shows; none: no
	// CPU table.
	Procs []Proc
	// Idle is how long their CPU rate is sampled at rest before the attack (the background:
	// pollers, heartbeats), so the report can tell the load's own share; 0: not sampled.
	Idle time.Duration
	// DatabaseURL is the services' PostgreSQL server, for the WAL it writes per order
	// (pg_current_wal_lsn before and after, the whole server's); empty: not measured.
	DatabaseURL string
}

// Default returns issue 5's load: 3,000 orders/s for 60 s.
func Default() Config {
	return Config{
		OrderURL: "http://127.0.0.1:8081", StockURL: "http://127.0.0.1:8082",
		Rate: 3000, Duration: 60 * time.Second, BuyerRate: 4,
		Timeout: 30 * time.Second, MaxWorkers: 2000, Grace: 60 * time.Second, Idle: 5 * time.Second,
	}
}

// RegisterFlags binds c's fields to flags on fs, with c's current values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.OrderURL, "order-url", c.OrderURL, "order service base URL")
	fs.StringVar(&c.StockURL, "stock-url", c.StockURL, "stock service base URL")
	fs.IntVar(&c.Rate, "rate", c.Rate, "POST /v1/orders per second")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "how long to send orders")
	fs.Float64Var(&c.BuyerRate, "buyer-rate", c.BuyerRate, "orders per second per buyer (below the order service's ORDER_RATE_PER_BUYER)")
	fs.StringVar(&c.SKU, "sku", c.SKU, "hot SKU, created or restocked (default LOAD-<random>)")
	fs.Int64Var(&c.Units, "units", c.Units, "units available on the SKU before the attack (0: rate × duration)")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "per-request timeout")
	fs.Uint64Var(&c.MaxWorkers, "max-workers", c.MaxWorkers, "most requests in flight")
	fs.DurationVar(&c.Grace, "grace", c.Grace, "after the attack, how long orders may take to reach awaiting_payment")
	fs.IntVar(&c.StockPID, "stock-pid", c.StockPID, "stock service pid for its peak RSS (default: from .run/pids)")
	fs.DurationVar(&c.Idle, "idle", c.Idle, "before the attack, how long to sample the processes' CPU at rest (0: not)")
}

// Validate reports the first unusable field.
func (c Config) Validate() error {
	switch {
	case c.OrderURL == "" || c.StockURL == "":
		return errors.New("order and stock URLs are required")
	case c.Rate < 1 || c.Duration < time.Second || c.BuyerRate <= 0:
		return errors.New("rate must be >= 1, duration >= 1s and buyer-rate > 0")
	case c.Units < 0 || c.Timeout <= 0 || c.Grace < 0 || c.Idle < 0 || c.MaxWorkers < 1:
		return errors.New("units, grace and idle must be >= 0, timeout and max-workers > 0")
	}
	return nil
}

// The SKU's terms: a payment window that outlives any run, so no lock is released while the
// test counts them.
const (
	unitPrice     = 100
	paymentWindow = 30 * time.Minute
)

// Run sends the orders, waits up to Grace for them to leave pending, and measures. Progress
// goes to progress (nil: none). The report is returned whenever the attack ran; its Checks
// say whether the stock added up.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Units == 0 {
		cfg.Units = int64(cfg.Rate) * int64(cfg.Duration/time.Second)
	}
	runID := randomHex(4)
	if cfg.SKU == "" {
		cfg.SKU = "LOAD-" + runID
	}
	c := flashsale.NewClient(&http.Client{Timeout: 30 * time.Second}, cfg.OrderURL, cfg.StockURL, "", "").WithSigner(cfg.Signer)
	if err := ensureStock(ctx, c, cfg, runID); err != nil {
		return nil, err
	}
	r := &Report{Config: cfg, Codes: map[int]int{}, ByStatus: map[string]int{}}
	for i := range int(math.Ceil(float64(cfg.Rate) / cfg.BuyerRate)) {
		r.Buyers = append(r.Buyers, fmt.Sprintf("load-%s-%d", runID, i))
	}
	var err error
	if r.Before, err = c.SKU(ctx, cfg.SKU); err != nil {
		return nil, err
	}
	r.RSSReset = resetPeakRSS(cfg.StockPID) == nil

	start, idle := measureIdle(ctx, cfg.Procs, cfg.Idle, progress)
	startAt := time.Now()
	walFrom, walErr := walLSN(ctx, cfg.DatabaseURL)
	vacFrom, vacErr := autovacuums(ctx, cfg.DatabaseURL)
	pgFrom, pgErr := pgSample(ctx, cfg.DatabaseURL)
	fmt.Fprintf(progress, "loadtest: %d orders/s for %s on %s (%d available)\n", cfg.Rate, cfg.Duration, cfg.SKU, r.Before.Available)
	accepted := attack(ctx, cfg, r, runID, progress)

	fmt.Fprintf(progress, "loadtest: waiting up to %s for %d orders to leave pending\n", cfg.Grace, len(accepted))
	deadline := time.Now().Add(cfg.Grace)
	if err := waitLocked(ctx, c, cfg, r, len(accepted), deadline); err != nil {
		return r, err
	}
	if len(cfg.Procs) > 0 {
		idleRate := 0.0
		if cfg.Idle > 0 {
			idleRate = totalMs(idle) / cfg.Idle.Seconds()
		}
		end, endAt := quiet(ctx, cfg.Procs, idleRate)
		r.CPU, r.CPUWindow = uses(cfg.Procs, start, end), endAt.Sub(startAt)
		if r.PGSharesErr = pgErr; pgErr == nil {
			var pgTo map[int]pgProc
			if pgTo, r.PGSharesErr = pgSample(ctx, cfg.DatabaseURL); r.PGSharesErr == nil {
				r.PGShares = pgShares(pgFrom, pgTo)
			}
		}
		for i := range r.CPU {
			if cfg.Idle > 0 && idle[i].Note == "" {
				r.CPU[i].IdleMsPerSec = idle[i].Ms / cfg.Idle.Seconds()
			}
		}
	}
	if r.WALErr = walErr; walErr == nil {
		r.WALBytes, r.WALErr = walSince(ctx, cfg.DatabaseURL, walFrom)
	}
	if r.AutovacuumsErr = vacErr; vacErr == nil {
		var vacTo int64
		vacTo, r.AutovacuumsErr = autovacuums(ctx, cfg.DatabaseURL)
		r.Autovacuums = vacTo - vacFrom
	}
	orders, err := settle(ctx, c, cfg, r, deadline)
	if err != nil {
		return r, err
	}
	r.tally(accepted, orders)
	if r.After, err = c.SKU(ctx, cfg.SKU); err != nil {
		return r, err
	}
	r.PeakRSS, r.RSSErr = peakRSS(cfg.StockPID)
	v, err := c.Verify(ctx)
	if err != nil {
		return r, err
	}
	r.check(v)
	return r, nil
}

// ensureStock prices the SKU on the order service and creates it with Units, or tops an
// existing one up to Units available through a purchase and its receipt.
func ensureStock(ctx context.Context, c *flashsale.Client, cfg Config, runID string) error {
	if err := c.SetPrice(ctx, cfg.SKU, unitPrice, "CNY", paymentWindow); err != nil {
		return err
	}
	err := c.CreateSKU(ctx, cfg.SKU, cfg.Units)
	var ae *flashsale.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		return err
	}
	f, err := c.SKU(ctx, cfg.SKU)
	if err != nil || f.Available >= cfg.Units {
		return err
	}
	qty := map[string]int64{"qty": cfg.Units - f.Available}
	key := map[string]string{"Idempotency-Key": "loadtest-" + runID}
	for _, step := range []string{"purchases", "receipts"} {
		u := cfg.StockURL + "/v1/skus/" + url.PathEscape(cfg.SKU) + "/" + step
		if _, err := c.Do(ctx, "restock "+cfg.SKU, http.MethodPost, u, qty, key, nil); err != nil {
			return err
		}
	}
	return nil
}

// attack runs vegeta and returns the accepted orders' ids with the time each POST was sent.
func attack(ctx context.Context, cfg Config, r *Report, runID string, progress io.Writer) map[string]time.Time {
	bodies, bearers := make([][]byte, len(r.Buyers)), make([]string, len(r.Buyers))
	for i, buyer := range r.Buyers {
		bodies[i], _ = json.Marshal(map[string]any{
			"buyer_id": buyer, "currency": "CNY", "items": []map[string]any{{"sku": cfg.SKU, "qty": 1, "unit_price": unitPrice}},
		})
		if cfg.Signer != nil {
			tok, err := cfg.Signer.Mint(buyer, []auth.Role{auth.Buyer}, buyer, cfg.Duration+time.Hour)
			if err != nil {
				panic(err) // a loaded signer always signs
			}
			bearers[i] = "Bearer " + tok
		}
	}
	var seq atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		n := seq.Add(1)
		i := n % uint64(len(r.Buyers))
		t.Method, t.URL, t.Body = http.MethodPost, cfg.OrderURL+"/v1/orders", bodies[i]
		t.Header = http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {fmt.Sprintf("%s-%d", runID, n)}}
		if bearers[i] != "" {
			t.Header.Set("Authorization", bearers[i])
		}
		return nil
	}
	atk := vegeta.NewAttacker(vegeta.Timeout(cfg.Timeout), vegeta.MaxWorkers(cfg.MaxWorkers), vegeta.MaxBody(64<<10))
	results := atk.Attack(targeter, vegeta.Rate{Freq: cfg.Rate, Per: time.Second}, cfg.Duration, "orders")
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()

	accepted := map[string]time.Time{}
	var m vegeta.Metrics
	errs := map[string]bool{}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for res := range results {
		m.Add(res)
		r.Codes[int(res.Code)]++
		if res.Code/100 == 2 {
			var o struct {
				OrderID string `json:"order_id"`
			}
			if err := json.Unmarshal(res.Body, &o); err == nil && o.OrderID != "" {
				accepted[o.OrderID] = res.Timestamp
			}
		} else if res.Error != "" && !errs[res.Error] && len(errs) < 5 {
			errs[res.Error] = true
			r.Errors = append(r.Errors, res.Error)
		}
		select {
		case <-tick.C:
			fmt.Fprintf(progress, "  %4.0fs: answered %d, accepted %d\n", time.Since(m.Earliest).Seconds(), m.Requests, len(accepted))
		default:
		}
	}
	m.Close()
	r.Sent, r.SentRate = int(m.Requests), m.Rate
	r.Elapsed = m.Duration + m.Wait
	r.Accepted = len(accepted)
	r.PostP50, r.PostP99 = m.Latencies.P50, m.Latencies.P99
	return accepted
}

// listedOrder is one order of the run's buyer, as GET /v1/orders?buyer_id= lists it.
type listedOrder = flashsale.OrderView

// waitLocked waits until the stock service has locked every accepted order or the deadline
// passes.
func waitLocked(ctx context.Context, c *flashsale.Client, cfg Config, r *Report, accepted int, deadline time.Time) error {
	for time.Now().Before(deadline) {
		f, err := c.SKU(ctx, cfg.SKU)
		if err != nil {
			return err
		}
		if f.Locked-r.Before.Locked >= int64(accepted) {
			return nil
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// measureIdle samples procs' CPU time over d with no load and returns the last sample (the
// attack's start) and the use at rest.
func measureIdle(ctx context.Context, procs []Proc, d time.Duration, progress io.Writer) ([]cpuSample, []CPUUse) {
	from := sampleAll(procs)
	if len(procs) == 0 || d == 0 {
		return from, uses(procs, from, from)
	}
	fmt.Fprintf(progress, "loadtest: %s of CPU at rest first\n", d)
	sleep(ctx, d)
	to := sampleAll(procs)
	return to, uses(procs, from, to)
}

// quietMax bounds quiet's wait.
const quietMax = 15 * time.Second

// quiet waits until the processes' CPU over a second is back within 100 ms of their rate at
// rest — the order and timeout services may still be consuming stock.locked when the stock
// service has locked every order — or quietMax has passed, and returns the last sample.
func quiet(ctx context.Context, procs []Proc, idleMsPerSec float64) ([]cpuSample, time.Time) {
	prev, at := sampleAll(procs), time.Now()
	for deadline := at.Add(quietMax); time.Now().Before(deadline) && sleep(ctx, time.Second); {
		now, nowAt := sampleAll(procs), time.Now()
		rate := totalMs(uses(procs, prev, now)) / nowAt.Sub(at).Seconds()
		prev, at = now, nowAt
		if rate <= idleMsPerSec+100 {
			break
		}
	}
	return prev, at
}

// settle lists the buyers' orders until none is pending or the deadline has passed.
func settle(ctx context.Context, c *flashsale.Client, cfg Config, r *Report, deadline time.Time) ([]listedOrder, error) {
	for {
		orders, err := listAll(ctx, c, cfg.OrderURL, r.Buyers)
		if err != nil {
			return nil, err
		}
		pending := 0
		for _, o := range orders {
			if o.Status == "pending" {
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) || !sleep(ctx, time.Second) {
			r.Settled = time.Now()
			return orders, ctx.Err()
		}
	}
}

// listAll lists the orders of every buyer, eight buyers at a time.
func listAll(ctx context.Context, c *flashsale.Client, orderURL string, buyers []string) ([]listedOrder, error) {
	lists, errs := make([][]listedOrder, len(buyers)), make([]error, len(buyers))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, buyer := range buyers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			lists[i], errs[i] = list(ctx, c, orderURL, buyer)
		})
	}
	wg.Wait()
	return slices.Concat(lists...), errors.Join(errs...)
}

// list pages through all of a buyer's orders.
func list(ctx context.Context, c *flashsale.Client, orderURL, buyer string) ([]listedOrder, error) {
	var all []listedOrder
	before := ""
	for {
		var page struct {
			Orders     []listedOrder `json:"orders"`
			NextBefore string        `json:"next_before"`
		}
		u := orderURL + "/v1/orders?limit=100&buyer_id=" + url.QueryEscape(buyer) + "&before=" + url.QueryEscape(before)
		if _, err := c.Do(ctx, "list orders", http.MethodGet, u, nil, nil, &page); err != nil {
			return all, err
		}
		all = append(all, page.Orders...)
		if page.NextBefore == "" {
			return all, nil
		}
		before = page.NextBefore
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// resetPeakRSS sets the process's VmHWM back to its current RSS (clear_refs 5, Linux ≥ 4.0),
// so the peak read afterwards is this run's.
func resetPeakRSS(pid int) error {
	if pid == 0 {
		return errors.New("no pid")
	}
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// peakRSS is VmHWM of /proc/<pid>/status, in bytes.
func peakRSS(pid int) (int64, error) {
	if pid == 0 {
		return 0, errors.New("stock pid unknown")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			_, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
