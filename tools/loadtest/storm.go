package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/tools/flashsale"
)

// StormConfig is the sold-out storm (issue 15): Buyers buyers, one unit each, arrive within
// Window on Units units of one SKU — once with the SKU's flash-sale gate off and once with it
// armed, each on a SKU of its own.
type StormConfig struct {
	OrderURL, StockURL string
	// DatabaseURL is the PostgreSQL server of the services' databases (DBPrefix + order,
	// stock): the storm reads their transaction and row counters and the orders' outcomes.
	DatabaseURL string
	DBPrefix    string

	Buyers int
	Units  int64
	Window time.Duration
	// Modes are the runs, in order: "off" (no gate), "on" (gate armed before the storm).
	Modes      []string
	Timeout    time.Duration
	MaxWorkers uint64
	// Connections caps the connections to the order service (0: one per request in flight).
	Connections int
	Grace       time.Duration // after the storm, how long the orders may take to leave pending
	Signer      *auth.Signer
	// Procs are the processes whose CPU time over each storm's attack the report shows, per
	// POST answered (as Config.Procs); none: no CPU rows.
	Procs []Proc
}

// DefaultStorm is issue 15's storm: 50,000 buyers within 10 s on 5,000 units, gate off then on.
func DefaultStorm() StormConfig {
	return StormConfig{
		OrderURL: "http://127.0.0.1:8081", StockURL: "http://127.0.0.1:8082", DBPrefix: "stockflow_",
		Buyers: 50000, Units: 5000, Window: 10 * time.Second, Modes: []string{"off", "on"},
		Timeout: 30 * time.Second, MaxWorkers: 4000, Grace: 3 * time.Minute,
	}
}

// RegisterFlags binds c's fields to flags on fs.
func (c *StormConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.OrderURL, "order-url", c.OrderURL, "order service base URL")
	fs.StringVar(&c.StockURL, "stock-url", c.StockURL, "stock service base URL")
	fs.IntVar(&c.Buyers, "buyers", c.Buyers, "buyers, one POST of one unit each")
	fs.Int64Var(&c.Units, "units", c.Units, "units on sale")
	fs.DurationVar(&c.Window, "window", c.Window, "the buyers arrive evenly within this")
	fs.Func("modes", `gate modes to run, in order: "off,on" (default), "on" or "off"`, func(s string) error {
		c.Modes = nil
		for _, m := range strings.Split(s, ",") {
			if m != "on" && m != "off" {
				return fmt.Errorf("mode %q: want on or off", m)
			}
			c.Modes = append(c.Modes, m)
		}
		return nil
	})
	fs.DurationVar(&c.Grace, "grace", c.Grace, "after the storm, how long orders may take to leave pending")
	fs.Uint64Var(&c.MaxWorkers, "max-workers", c.MaxWorkers, "most requests in flight")
	fs.IntVar(&c.Connections, "connections", c.Connections, "most connections to the order service (0: as many as requests in flight)")
}

// StormRun is one mode's figures.
type StormRun struct {
	Mode     string
	SKU      string
	Sent     int
	Elapsed  time.Duration
	AnswerPS float64     // answers per second, first request to last answer
	Codes    map[int]int // by HTTP status; 0: transport error or timeout
	Errors   []string

	Winners, Losers           int // winners: orders that locked a unit; losers: every other attempt
	WinnerP50, WinnerP99      time.Duration
	LoserP50, LoserP99        time.Duration
	OrderRows                 int   // orders the order service stored for the SKU
	LoserRows                 int   // of them, orders that did not lock (each an order row, history, outbox rows and a stock transaction)
	OrderXacts, StockXacts    int64 // committed transactions in each database during the run (background work included)
	OrderInserts, StockInsert int64 // rows inserted in each database during the run
	Pending                   int   // orders still pending when the grace period ended
	// Bypassed is how many gate calls Redis did not answer within GATE_TIMEOUT during the run
	// (the order service's stockflow_order_gate_total{verdict="bypassed"}, increase; -1: not
	// read). Those buyers took the database path by design, so a loser among them is stored.
	Bypassed int
	// Unarmed is how many gate calls found no SKU of the order armed during the run (the
	// verdict "open", increase; -1: not read): every one in the run without the gate, none
	// in the run with it, or the gate was lost mid-storm.
	Unarmed int
	// CPU is each of StormConfig.Procs' CPU time from the first POST to the last answer.
	CPU    []CPUUse
	After  flashsale.SKUFigures
	Checks []Check
}

// StormReport is every mode's run.
type StormReport struct {
	Config StormConfig
	Runs   []*StormRun
}

// Failed reports whether a correctness check failed in any run.
func (r *StormReport) Failed() bool {
	for _, run := range r.Runs {
		if slices.ContainsFunc(run.Checks, func(c Check) bool { return !c.Pass }) {
			return true
		}
	}
	return false
}

// Storm runs the storm in each mode and returns the report (nil when nothing ran).
func Storm(ctx context.Context, cfg StormConfig, progress io.Writer) (*StormReport, error) {
	if cfg.Buyers < 1 || cfg.Units < 1 || cfg.Window < time.Second || len(cfg.Modes) == 0 || cfg.DatabaseURL == "" {
		return nil, errors.New("storm: buyers and units >= 1, window >= 1s, a mode and the database URL are required")
	}
	if progress == nil {
		progress = io.Discard
	}
	c := flashsale.NewClient(&http.Client{Timeout: 30 * time.Second}, cfg.OrderURL, cfg.StockURL, "", "").WithSigner(cfg.Signer)
	runID := randomHex(4)
	fmt.Fprintf(progress, "storm: minting %d buyer tokens\n", cfg.Buyers)
	bodies, bearers, err := stormBuyers(cfg, runID)
	if err != nil {
		return nil, err
	}
	rep := &StormReport{Config: cfg}
	var restMsPerSec float64 // the processes' CPU at rest, measured before the first mode
	if len(cfg.Modes) > 1 {
		_, rest := measureIdle(ctx, cfg.Procs, stormRest, progress)
		restMsPerSec = totalMs(rest) / stormRest.Seconds()
	}
	for i, mode := range cfg.Modes {
		if i > 0 && len(cfg.Procs) > 0 {
			// The previous mode's orders are out of pending, but their outcomes may still be
			// followed, acknowledged and relayed: a storm that begins meanwhile shares the
			// cores with them (a gate-on run right after gate off once had 484 gate calls
			// time out waiting for CPU).
			fmt.Fprintf(progress, "storm: waiting for the processes to be back at rest\n")
			quiet(ctx, cfg.Procs, restMsPerSec)
		}
		run, err := storm(ctx, c, cfg, mode, runID, bodies, bearers, progress)
		if run != nil {
			rep.Runs = append(rep.Runs, run)
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// stormRest is how long the storm samples the processes' CPU at rest before its first mode;
// between modes it waits until they are back within quiet's margin of that rate (a fixed
// rate would be wrong for two replicas, whose rest is twice one's).
const stormRest = 3 * time.Second

// stormBuyers are the request bodies (per buyer, SKU filled in per mode) and bearer tokens.
func stormBuyers(cfg StormConfig, runID string) ([]string, []string, error) {
	buyers, bearers := make([]string, cfg.Buyers), make([]string, cfg.Buyers)
	for i := range buyers {
		buyers[i] = fmt.Sprintf("storm-%s-%d", runID, i)
		if cfg.Signer != nil {
			tok, err := cfg.Signer.Mint(buyers[i], []auth.Role{auth.Buyer}, buyers[i], cfg.Window+time.Hour)
			if err != nil {
				return nil, nil, err
			}
			bearers[i] = "Bearer " + tok
		}
	}
	return buyers, bearers, nil
}

func storm(ctx context.Context, c *flashsale.Client, cfg StormConfig, mode, runID string, buyers, bearers []string, progress io.Writer) (*StormRun, error) {
	run := &StormRun{Mode: mode, SKU: "STORM-" + runID + "-" + mode, Codes: map[int]int{}}
	if err := c.SetPrice(ctx, run.SKU, unitPrice, "CNY", paymentWindow); err != nil {
		return nil, err
	}
	if err := c.CreateSKU(ctx, run.SKU, cfg.Units); err != nil {
		return nil, err
	}
	if mode == "on" {
		if _, err := c.Do(ctx, "arm gate "+run.SKU, http.MethodPost, cfg.StockURL+"/v1/skus/"+url.PathEscape(run.SKU)+"/gate", nil, nil, nil); err != nil {
			return nil, err
		}
	}
	db := func(name string) (*pgx.Conn, error) {
		u, err := url.Parse(cfg.DatabaseURL)
		if err != nil {
			return nil, err
		}
		u.Path = "/" + cfg.DBPrefix + name
		return pgx.Connect(ctx, u.String())
	}
	orderDB, err := db("order")
	if err != nil {
		return nil, fmt.Errorf("storm: order database: %w", err)
	}
	defer orderDB.Close(context.WithoutCancel(ctx))
	stockDB, err := db("stock")
	if err != nil {
		return nil, fmt.Errorf("storm: stock database: %w", err)
	}
	defer stockDB.Close(context.WithoutCancel(ctx))
	ox0, oi0, err := dbCounters(ctx, orderDB)
	if err != nil {
		return nil, err
	}
	sx0, si0, err := dbCounters(ctx, stockDB)
	if err != nil {
		return nil, err
	}

	verdicts0, verdictsErr := c.GateVerdicts(ctx)
	rate := max(1, int(float64(cfg.Buyers)/cfg.Window.Seconds()))
	fmt.Fprintf(progress, "storm (gate %s): %d buyers at %d/s on %d units of %s\n", mode, cfg.Buyers, rate, cfg.Units, run.SKU)
	cpu0 := sampleAll(cfg.Procs)
	latency := stormAttack(ctx, cfg, run, rate, buyers, bearers)
	run.CPU = uses(cfg.Procs, cpu0, sampleAll(cfg.Procs))

	// Wait for the orders to leave pending, then for the statistics to be flushed (a backend
	// reports its counters at most once a second).
	deadline := time.Now().Add(cfg.Grace)
	for {
		if err := orderDB.QueryRow(ctx, `SELECT count(*) FROM orders o JOIN order_items i ON i.order_id = o.id
			WHERE i.sku = $1 AND o.status = 'pending'`, run.SKU).Scan(&run.Pending); err != nil {
			return run, err
		}
		if run.Pending == 0 || time.Now().After(deadline) || !sleep(ctx, time.Second) {
			break
		}
	}
	sleep(ctx, 2*time.Second)
	run.Bypassed, run.Unarmed = -1, -1
	verdicts1, err := c.GateVerdicts(ctx)
	if err = errors.Join(verdictsErr, err); err == nil {
		run.Bypassed = int(verdicts1["bypassed"] - verdicts0["bypassed"])
		run.Unarmed = int(verdicts1["open"] - verdicts0["open"])
	} else {
		run.Errors = append(run.Errors, "gate verdicts not read, so no stored loser is excused: "+err.Error())
	}
	if run.OrderXacts, run.OrderInserts, err = dbCounters(ctx, orderDB); err != nil {
		return run, err
	}
	if run.StockXacts, run.StockInsert, err = dbCounters(ctx, stockDB); err != nil {
		return run, err
	}
	run.OrderXacts, run.OrderInserts, run.StockXacts, run.StockInsert = run.OrderXacts-ox0, run.OrderInserts-oi0, run.StockXacts-sx0, run.StockInsert-si0

	// Winners are the orders that locked; everyone else lost, whatever the POST answered.
	rows, _ := orderDB.Query(ctx, `SELECT o.id, o.status FROM orders o JOIN order_items i ON i.order_id = o.id WHERE i.sku = $1`, run.SKU)
	var id, status string
	var winners, losers []time.Duration
	_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		run.OrderRows++
		won := status == "awaiting_payment" || status == "paid"
		if !won {
			run.LoserRows++
		}
		if d, ok := latency.byOrder[id]; ok {
			if won {
				winners = append(winners, d)
			} else {
				losers = append(losers, d)
			}
		}
		return nil
	})
	if err != nil {
		return run, err
	}
	losers = append(losers, latency.refused...)
	run.Winners, run.Losers = len(winners), run.Sent-len(winners)
	slices.Sort(winners)
	slices.Sort(losers)
	run.WinnerP50, run.WinnerP99 = percentile(winners, 0, 0.50), percentile(winners, 0, 0.99)
	run.LoserP50, run.LoserP99 = percentile(losers, 0, 0.50), percentile(losers, 0, 0.99)
	if run.After, err = c.SKU(ctx, run.SKU); err != nil {
		return run, err
	}
	v, err := c.Verify(ctx)
	if err != nil {
		return run, err
	}
	run.check(cfg, v)
	return run, nil
}

// stormLatency is the POST answer times: of each stored order by id, and of every attempt
// refused at once (409 sold_out, 429, errors).
type stormLatency struct {
	byOrder map[string]time.Duration
	refused []time.Duration
}

func stormAttack(ctx context.Context, cfg StormConfig, run *StormRun, rate int, buyers, bearers []string) stormLatency {
	bodies := make([][]byte, len(buyers))
	for i, b := range buyers {
		bodies[i], _ = json.Marshal(map[string]any{"buyer_id": b, "currency": "CNY", "items": []map[string]any{{"sku": run.SKU, "qty": 1, "unit_price": unitPrice}}})
	}
	var seq atomic.Int64
	targeter := func(t *vegeta.Target) error {
		i := int(seq.Add(1) - 1)
		if i >= len(bodies) {
			return vegeta.ErrNoTargets
		}
		t.Method, t.URL, t.Body = http.MethodPost, cfg.OrderURL+"/v1/orders", bodies[i]
		t.Header = http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {run.SKU + "-" + buyers[i]}}
		if bearers[i] != "" {
			t.Header.Set("Authorization", bearers[i])
		}
		return nil
	}
	atk := vegeta.NewAttacker(vegeta.Timeout(cfg.Timeout), vegeta.MaxWorkers(cfg.MaxWorkers), vegeta.MaxBody(64<<10), vegeta.KeepAlive(true),
		vegeta.MaxConnections(cfg.Connections))
	// A little longer than the window: the targeter ends the attack after the last buyer.
	results := atk.Attack(targeter, vegeta.Rate{Freq: rate, Per: time.Second}, cfg.Window+cfg.Window/2, "storm")
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()
	lat := stormLatency{byOrder: map[string]time.Duration{}}
	var m vegeta.Metrics
	seen := map[string]bool{}
	for res := range results {
		if res.Error == vegeta.ErrNoTargets.Error() {
			continue // a worker that found every buyer sent: no request was made
		}
		m.Add(res)
		run.Codes[int(res.Code)]++
		var o struct {
			OrderID string `json:"order_id"`
		}
		if res.Code/100 == 2 && json.Unmarshal(res.Body, &o) == nil && o.OrderID != "" {
			lat.byOrder[o.OrderID] = res.Latency
			continue
		}
		lat.refused = append(lat.refused, res.Latency)
		if res.Code == http.StatusConflict && bytes.Contains(res.Body, []byte(`"sold_out"`)) {
			continue // a loser's answer, not an error
		}
		if res.Error != "" && !seen[res.Error] && len(seen) < 5 {
			seen[res.Error] = true
			run.Errors = append(run.Errors, res.Error)
		}
	}
	m.Close()
	run.Sent, run.Elapsed = int(m.Requests), m.Duration+m.Wait
	if run.Elapsed > 0 {
		run.AnswerPS = float64(m.Requests) / run.Elapsed.Seconds()
	}
	return lat
}

// dbCounters are a database's committed transactions and inserted rows so far.
func dbCounters(ctx context.Context, conn *pgx.Conn) (xacts, inserts int64, err error) {
	err = conn.QueryRow(ctx, `SELECT xact_commit, tup_inserted FROM pg_stat_database WHERE datname = current_database()`).Scan(&xacts, &inserts)
	if err != nil {
		return 0, 0, fmt.Errorf("storm: pg_stat_database: %w", err)
	}
	return xacts, inserts, nil
}

func (r *StormRun) check(cfg StormConfig, v flashsale.VerifyReport) {
	a := r.After
	add := func(name string, pass bool, detail string) {
		r.Checks = append(r.Checks, Check{Name: name, Pass: pass, Detail: detail})
	}
	add("no oversell", a.Locked+a.Sold <= a.OnHand && a.Available >= 0,
		fmt.Sprintf("on_hand %d, locked %d, sold %d, available %d", a.OnHand, a.Locked, a.Sold, a.Available))
	add("every unit locked once", a.Locked == cfg.Units && int64(r.Winners) == cfg.Units,
		fmt.Sprintf("%d units locked by %d winning orders, of %d", a.Locked, r.Winners, cfg.Units))
	add("no order left pending", r.Pending == 0, fmt.Sprintf("%d pending after the grace period", r.Pending))
	add("ledger = summary", v.Consistent, fmt.Sprintf("%d differences", len(v.Differences)))
	if r.Mode == "on" {
		add("losers the gate answered wrote nothing", r.LoserRows <= max(0, r.Bypassed),
			fmt.Sprintf("%d orders stored for buyers who did not win; %d gate calls Redis did not answer in time took the database path", r.LoserRows, r.Bypassed))
		add("the gate stayed armed", r.Unarmed == 0, fmt.Sprintf("%d gate calls found the SKU not armed", r.Unarmed))
	}
}

// WriteText prints the runs side by side, then the checks.
func (r *StormReport) WriteText(w io.Writer) error {
	c := r.Config
	fmt.Fprintf(w, "\nsold-out storm: %d buyers within %s on %d units, one unit each\n\n", c.Buyers, c.Window, c.Units)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(*StormRun) string) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, run := range r.Runs {
			fmt.Fprintf(tw, "%s\t", f(run))
		}
		fmt.Fprintln(tw)
	}
	row("gate", func(s *StormRun) string { return s.Mode })
	row("POSTs answered", func(s *StormRun) string { return fmt.Sprint(s.Sent) })
	row("answers/s", func(s *StormRun) string { return fmt.Sprintf("%.0f", s.AnswerPS) })
	row("201 / 409 / other", func(s *StormRun) string {
		other := s.Sent - s.Codes[201] - s.Codes[409]
		return fmt.Sprintf("%d / %d / %d", s.Codes[201], s.Codes[409], other)
	})
	row("winners", func(s *StormRun) string { return fmt.Sprint(s.Winners) })
	row("winner POST p50 / p99", func(s *StormRun) string { return ms(s.WinnerP50) + " / " + ms(s.WinnerP99) })
	row("loser POST p50 / p99", func(s *StormRun) string { return ms(s.LoserP50) + " / " + ms(s.LoserP99) })
	row("orders stored for losers", func(s *StormRun) string { return fmt.Sprint(s.LoserRows) })
	row("gate calls Redis missed (bypassed)", func(s *StormRun) string { return fmt.Sprint(s.Bypassed) })
	row("gate calls finding no SKU armed", func(s *StormRun) string { return fmt.Sprint(s.Unarmed) })
	perAnswer := func(ms float64, s *StormRun) string {
		if v, ok := perOrder(ms, s.Sent); ok {
			return fmt.Sprintf("%.3f", v)
		}
		return "—"
	}
	for i, p := range c.Procs {
		row("CPU ms / answer: "+p.Name, func(s *StormRun) string {
			if s.CPU[i].Note != "" {
				return "—"
			}
			return perAnswer(s.CPU[i].Ms, s)
		})
	}
	if len(c.Procs) > 0 {
		row("CPU ms / answer: all", func(s *StormRun) string { return perAnswer(totalMs(s.CPU), s) })
	}
	row("order db commits / attempt", func(s *StormRun) string { return fmt.Sprintf("%.2f", float64(s.OrderXacts)/float64(max(1, s.Sent))) })
	row("stock db commits / attempt", func(s *StormRun) string { return fmt.Sprintf("%.2f", float64(s.StockXacts)/float64(max(1, s.Sent))) })
	row("rows inserted / attempt", func(s *StormRun) string {
		return fmt.Sprintf("%.2f", float64(s.OrderInserts+s.StockInsert)/float64(max(1, s.Sent)))
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, run := range r.Runs {
		for _, e := range run.Errors {
			fmt.Fprintf(w, "gate %s: error: %s\n", run.Mode, e)
		}
		for _, ch := range run.Checks {
			fmt.Fprintf(w, "gate %s: %s: %s (%s)\n", run.Mode, ch.Name, passFail(ch.Pass, "ok", "FAILED"), ch.Detail)
		}
	}
	return nil
}
