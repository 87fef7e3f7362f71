package flashsale

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// Sample is the SKU's water level at one moment of the sale.
type Sample struct {
	At        time.Duration // since the sale opened
	OnHand    int64
	Available int64
	Locked    int64
	Sold      int64
	Orders    int64 // orders placed so far
	Paid      int64 // orders the simulator has seen paid so far
}

// Outcome is one order of the sale as the simulator last saw it.
type Outcome struct {
	OrderID string
	Buyer   int
	Attempt int    // 0 for a buyer's first order
	Qty     int64  // units ordered
	Intent  string // pay | cancel | timeout, for an order that awaited payment
	PaidOK  bool   // the payment adapter acknowledged its payment callback
	Status  string // last status seen
}

// Check is one invariant or counter comparison of the report.
type Check struct {
	Name   string
	Pass   bool
	Detail string
}

// Report is the outcome of one flash sale: what the simulator did, what the APIs say, and the
// checks between the two.
type Report struct {
	SKU      string
	Config   Config
	Duration time.Duration // from the sale's opening to the end of the checks
	Selling  time.Duration // from the opening until every buyer was done

	Buyers  int // first-wave buyers
	Orders  int // orders placed, retries included
	Retries int // orders placed by returning buyers

	// The buyers' intents for orders that awaited payment, and what the APIs answered.
	Paying, Cancelling, Abandoning int
	PaymentsAccepted               int // sandbox callbacks acknowledged with 200
	CancelsAccepted                int
	CancelsRefused                 int // 409: the order had already moved on (a deadline won)
	Missed                         int // orders that closed before their buyer saw them awaiting payment
	Calls                          int64
	Gate                           string        // armed, unavailable (no Redis) or off
	TurnedAway                     int           // buyers' attempts the gate answered 409 sold_out: no order was made
	LockLagP50, LockLagP95         time.Duration // order placed → awaiting_payment, by order history
	LockLagMax                     time.Duration

	ByStatus      map[string]int // orders by final status
	HeldLock      int            // orders whose history shows a lock: awaiting_payment, or paid, closed or cancelled (an outcome that overtook stock.locked)
	EverPaid      int            // ... paid
	EverClosed    int            // ... closed
	Relocked      int            // sell rows that took released stock again (late payments)
	EverCancelled int            // ... cancelled
	PaidUnits     int64          // units of orders whose final status is paid
	NotTerminal   []string       // ids (at most 10) of orders that never ended
	Outcomes      []Outcome      // every order placed, in placing order

	LedgerRows map[string]int   // the SKU's ledger rows by change type
	LedgerQty  map[string]int64 // their quantities summed
	LedgerFold SKUFigures       // the fold (sum of after-before) of the SKU's ledger
	Final      SKUFigures       // GET /v1/skus/{sku} at the end
	Samples    []Sample

	Overdue     int // overdue-locks count (grace 2s) after the last deadline
	Consistent  bool
	Differences []map[string]any

	Metrics MetricFigures // what stock's /metrics said about the sale

	Checks       []Check
	Errors       int      // API calls that failed for good
	ErrorSamples []string // the first few
	ChartPath    string   // the chart written, if any
	ChartErr     string

	unsettled int
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool { return r.failedChecks() > 0 }

func (r *Report) failedChecks() int {
	n := 0
	for _, c := range r.Checks {
		if !c.Pass {
			n++
		}
	}
	return n
}

// Check returns the named check and whether the report has it.
func (r *Report) Check(name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// report gathers the final state from the APIs and runs the checks.
func (s *sim) report(ctx context.Context, selling time.Duration, od overdue) *Report {
	r := &Report{SKU: s.sku, Config: s.cfg, Selling: selling, Buyers: s.cfg.Buyers, Overdue: od.Count,
		ByStatus: map[string]int{}, LedgerRows: map[string]int{}, LedgerQty: map[string]int64{}}
	r.Config.HTTPClient = nil
	r.Gate, r.TurnedAway = s.gate, int(s.turnedAway.Load())
	var lags []time.Duration
	for _, rec := range s.records() {
		r.Orders++
		if rec.Attempt > 0 {
			r.Retries++
		}
		switch rec.Intent {
		case "pay":
			r.Paying++
		case "cancel":
			r.Cancelling++
		case "timeout":
			r.Abandoning++
		}
		r.PaymentsAccepted += b2i(rec.PaidOK)
		r.CancelsAccepted += b2i(rec.CancelOK)
		r.CancelsRefused += b2i(rec.Refused)
		status, history, _ := rec.snapshot()
		r.Missed += b2i(rec.Missed)
		rec.mu.Lock()
		if rec.lockLag > 0 {
			lags = append(lags, rec.lockLag)
		}
		rec.mu.Unlock()
		r.Outcomes = append(r.Outcomes, Outcome{OrderID: rec.ID, Buyer: rec.Buyer, Attempt: rec.Attempt, Qty: rec.Qty, Intent: rec.Intent, PaidOK: rec.PaidOK, Status: status})
		r.ByStatus[status]++
		r.HeldLock += b2i(slices.ContainsFunc(history, func(st string) bool {
			return st == "awaiting_payment" || st == "paid" || st == "closed" || st == "cancelled"
		}))
		r.EverPaid += b2i(slices.Contains(history, "paid"))
		r.EverClosed += b2i(slices.Contains(history, "closed"))
		r.EverCancelled += b2i(slices.Contains(history, "cancelled"))
		if status == "paid" {
			r.PaidUnits += rec.Qty
		}
		if !rec.settled(status) {
			r.unsettled++
			if len(r.NotTerminal) < 10 {
				r.NotTerminal = append(r.NotTerminal, rec.ID+" ("+status+")")
			}
		}
	}
	if len(lags) > 0 {
		slices.Sort(lags)
		r.LockLagP50, r.LockLagP95, r.LockLagMax = lags[len(lags)/2], lags[len(lags)*95/100], lags[len(lags)-1]
	}
	r.Calls = s.calls.Load()

	// Read the summary on both sides of the ledger so the fold compares like with like: on a
	// system still moving, take the pair again (a few times at most).
	var ledger []ledgerEntry
	var ledgerErr error
	for try := 0; try < 5; try++ {
		before, err := s.c.SKU(ctx, s.sku)
		if err != nil {
			ledgerErr = err
			continue
		}
		ledger, ledgerErr = s.c.ledger(ctx, s.sku)
		if ledgerErr != nil {
			continue
		}
		if r.Final, err = s.c.SKU(ctx, s.sku); err != nil {
			ledgerErr = err
			continue
		}
		if r.Final == before {
			break
		}
	}
	if ledgerErr != nil {
		s.fail(ledgerErr)
	}
	for _, e := range ledger {
		r.LedgerRows[e.ChangeType]++
		r.LedgerQty[e.ChangeType] += e.Qty
		if e.ChangeType == "sell" && e.After.Locked == e.Before.Locked {
			r.Relocked++ // a late payment: available → sold directly
		}
		r.LedgerFold.OnHand += e.After.OnHand - e.Before.OnHand
		r.LedgerFold.Available += e.After.Available - e.Before.Available
		r.LedgerFold.Locked += e.After.Locked - e.Before.Locked
		r.LedgerFold.Sold += e.After.Sold - e.Before.Sold
		r.LedgerFold.Incoming += e.After.Incoming - e.Before.Incoming
	}
	v, err := s.c.Verify(ctx)
	if err != nil {
		s.fail(err)
	}
	r.Consistent, r.Differences = v.Consistent, v.Differences
	r.Final.SKU = s.sku
	r.LedgerFold.SKU = s.sku
	s.takeSample(ctx) // the final water level, after everything settled
	s.mu.Lock()
	r.Samples = slices.Clone(s.samples)
	r.Errors, r.ErrorSamples = s.nerrs, slices.Clone(s.errs)
	s.mu.Unlock()
	r.Duration = time.Since(s.start)
	r.Checks = r.checks(ledgerErr == nil)
	return r
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Check names, for tests and readers.
const (
	CheckNoOversell      = "no oversell"
	CheckAddsUp          = "quantities add up at every sample"
	CheckLedgerFold      = "ledger fold equals summary"
	CheckNoOverdueLock   = "no lock past its deadline"
	CheckAllTerminal     = "every order terminal"
	CheckNoErrors        = "no failed API calls"
	CheckStatusesSum     = "orders by status = orders placed"
	CheckLockRows        = "lock rows = orders that held a lock"
	CheckSellRows        = "sell rows = paid orders"
	CheckTimeoutRows     = "release_timeout rows = closed + late payments (re-sold or refunded)"
	CheckCancelRows      = "release_cancel rows = cancelled orders"
	CheckPayments        = "payments acknowledged = paid orders"
	CheckSoldUnits       = "final sold = units of paid orders"
	CheckNothingLocked   = "final locked = 0, available = on_hand - sold"
	CheckSamplesObserved = "water level sampled"
	CheckMetrics         = "stock's metrics = the ledger"
)

// metricsCheck holds what stock's /metrics counted during the sale against the ledger and the
// orders: every lock row was counted as a lock, every rejected order as a rejection.
func (r *Report) metricsCheck() Check {
	m := r.Metrics
	pass := m.Read && m.Locked == int64(r.LedgerRows["lock"]) && m.Rejected == int64(r.ByStatus["rejected"]) && m.LockBatches > 0
	detail := fmt.Sprintf("%s (ledger lock rows %d, rejected orders %d)", m, r.LedgerRows["lock"], r.ByStatus["rejected"])
	return Check{Name: CheckMetrics, Pass: pass, Detail: detail}
}

func (r *Report) checks(haveLedger bool) []Check {
	n := r.Config.Units
	var cs []Check
	add := func(name string, pass bool, format string, args ...any) {
		cs = append(cs, Check{Name: name, Pass: pass, Detail: fmt.Sprintf(format, args...)})
	}
	all := append(slices.Clone(r.Samples), Sample{At: r.Duration, OnHand: r.Final.OnHand, Available: r.Final.Available, Locked: r.Final.Locked, Sold: r.Final.Sold})

	add(CheckSamplesObserved, len(r.Samples) > 0, "%d samples", len(r.Samples))
	oversell := ""
	for _, s := range all {
		if s.Sold > n || s.Sold+s.Locked > s.OnHand {
			oversell = fmt.Sprintf("at %s: sold %d locked %d on_hand %d (units %d)", s.At.Round(time.Second), s.Sold, s.Locked, s.OnHand, n)
			break
		}
	}
	maxSold := int64(0)
	for _, s := range all {
		maxSold = max(maxSold, s.Sold)
	}
	add(CheckNoOversell, oversell == "", "%s", or(oversell, fmt.Sprintf("max sold %d ≤ %d and sold+locked ≤ on_hand at all %d samples", maxSold, n, len(all))))

	bad := ""
	for _, s := range all {
		if s.Available != s.OnHand-s.Locked-s.Sold || s.Available < 0 || s.Locked < 0 || s.Sold < 0 {
			bad = fmt.Sprintf("at %s: available %d, on_hand %d - locked %d - sold %d", s.At.Round(time.Second), s.Available, s.OnHand, s.Locked, s.Sold)
			break
		}
	}
	add(CheckAddsUp, bad == "", "%s", or(bad, fmt.Sprintf("available = on_hand - locked - sold, all ≥ 0, at all %d samples", len(all))))

	fold := r.LedgerFold
	foldOK := haveLedger && fold.OnHand == r.Final.OnHand && fold.Available == r.Final.Available && fold.Locked == r.Final.Locked && fold.Sold == r.Final.Sold && fold.Incoming == r.Final.Incoming
	add(CheckLedgerFold, foldOK && r.Consistent, "stock verify consistent=%v (%d differences); SKU ledger folds to on_hand %d available %d locked %d sold %d vs summary %d/%d/%d/%d",
		r.Consistent, len(r.Differences), fold.OnHand, fold.Available, fold.Locked, fold.Sold, r.Final.OnHand, r.Final.Available, r.Final.Locked, r.Final.Sold)
	add(CheckNoOverdueLock, r.Overdue == 0, "overdue-locks?grace=2s count %d after the last deadline + 3s", r.Overdue)
	add(CheckAllTerminal, r.unsettled == 0, "%d of %d orders not terminal (or paid but not yet sold) %s", r.unsettled, r.Orders, strings.Join(r.NotTerminal, ", "))
	add(CheckNoErrors, r.Errors == 0, "%d failed %s", r.Errors, strings.Join(r.ErrorSamples, "; "))

	sum := 0
	for _, v := range r.ByStatus {
		sum += v
	}
	add(CheckStatusesSum, sum == r.Orders, "%d = %d", sum, r.Orders)
	eq := func(name string, api, ours int, what string) {
		add(name, api == ours, "ledger %d, %s %d", api, what, ours)
	}
	eq(CheckLockRows, r.LedgerRows["lock"], r.HeldLock, "orders")
	eq(CheckSellRows, r.LedgerRows["sell"], r.EverPaid, "orders")
	// Every timeout release belongs to an order that stayed closed, or whose late payment was
	// re-sold or (stock gone) refunded — the sale requests no other refunds. (Not "ever
	// closed": the order service may see stock.sold before stock.released.)
	late := r.Relocked + r.ByStatus["refunded"] + r.ByStatus["refund_pending"]
	eq(CheckTimeoutRows, r.LedgerRows["release_timeout"], r.ByStatus["closed"]+late, "closed + re-sold + refunded")
	eq(CheckCancelRows, r.LedgerRows["release_cancel"], r.EverCancelled, "orders")
	refunding := r.ByStatus["refund_pending"] + r.ByStatus["refunded"]
	add(CheckPayments, r.PaymentsAccepted == r.EverPaid+refunding, "acknowledged %d, orders paid %d + refunding %d", r.PaymentsAccepted, r.EverPaid, refunding)
	add(CheckSoldUnits, r.Final.Sold == r.PaidUnits && r.LedgerQty["sell"] == r.PaidUnits, "sold %d, sell rows' qty %d, paid units %d", r.Final.Sold, r.LedgerQty["sell"], r.PaidUnits)
	add(CheckNothingLocked, r.Final.Locked == 0 && r.Final.Available == r.Final.OnHand-r.Final.Sold && r.Final.OnHand == n,
		"locked %d, available %d, on_hand %d, sold %d", r.Final.Locked, r.Final.Available, r.Final.OnHand, r.Final.Sold)
	return cs
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func pct(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

// statusOrder is the life-cycle order the report lists statuses in.
var statusOrder = []string{"pending", "awaiting_payment", "rejected", "paid", "closed", "cancelled", "shipped", "refund_pending", "refunded"}

var changeOrder = []string{"stocktake", "lock", "sell", "release_timeout", "release_cancel", "refund_restock", "ship", "purchase_expected", "purchase_inbound", "manual_adjust"}

// WriteText renders the report for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	provider := c.Provider
	if provider == "" {
		provider = "sandbox"
	}
	fmt.Fprintf(&b, "flash sale %s — %d units, %d buyers (+%d returning), concurrency %d, payment timeout %s, arrivals over %s, paying through %s\n",
		r.SKU, c.Units, r.Buyers, r.Retries, c.Concurrency, c.PaymentTimeout, c.ArrivalWindow, provider)
	switch r.Gate {
	case "armed":
		fmt.Fprintf(&b, "gate armed %s before the sale: it turned away %d attempts (409 sold_out, no order, no database row)\n", c.GateLead, r.TurnedAway)
	case "unavailable":
		fmt.Fprintf(&b, "gate unavailable (no Redis): every attempt took the database path\n")
	}
	fmt.Fprintf(&b, "selling took %s, the whole run with settling and checks %s\n\n", r.Selling.Round(100*time.Millisecond), r.Duration.Round(100*time.Millisecond))

	var rows [][]string
	row := func(cells ...any) {
		r := make([]string, len(cells))
		for i, c := range cells {
			r[i] = fmt.Sprint(c)
		}
		rows = append(rows, r)
	}
	row("orders by final status", "", "")
	for _, st := range orderedKeys(r.ByStatus, statusOrder) {
		row("  "+st, r.ByStatus[st], pct(r.ByStatus[st], r.Orders))
	}
	row("  total", r.Orders, "")
	row("")
	locks := r.LedgerRows["lock"]
	row("locks (ledger rows)", "this run", "share", "article §五")
	row("  locked", locks, pct(locks, int(c.Units))+" of units", "4250 (85.0%)")
	row("  paid (sell)", r.LedgerRows["sell"], pct(r.LedgerRows["sell"], locks), "3320 (78.1%)")
	row("  released by timeout", r.LedgerRows["release_timeout"], pct(r.LedgerRows["release_timeout"], locks), "680 (16.0%)")
	row("  released by cancel", r.LedgerRows["release_cancel"], pct(r.LedgerRows["release_cancel"], locks), "150 (3.5%)")
	row("  finally sold (units)", r.Final.Sold, pct(int(r.Final.Sold), int(c.Units))+" of units", "3470 (69.4%)")
	row("")
	row("ledger rows by change type", "rows", "qty")
	for _, t := range orderedKeys(r.LedgerRows, changeOrder) {
		row("  "+t, r.LedgerRows[t], r.LedgerQty[t])
	}
	row("")
	row("buyers", "", "")
	row("  meant to pay / payments acknowledged", r.Paying, r.PaymentsAccepted)
	row("  meant to cancel / accepted / refused", r.Cancelling, r.CancelsAccepted, r.CancelsRefused)
	row("  let it time out", r.Abandoning)
	row("  closed before the buyer saw it awaiting payment", r.Missed)
	row("  placed → awaiting_payment p50 / p95 / max", r.LockLagP50.Round(10*time.Millisecond), r.LockLagP95.Round(10*time.Millisecond), r.LockLagMax.Round(10*time.Millisecond))
	row(fmt.Sprintf("  API calls (%.0f/s)", float64(r.Calls)/max(r.Duration.Seconds(), 1)), r.Calls)
	writeTable(&b, rows)
	f := r.Final
	fmt.Fprintf(&b, "\nfinal quantities: on_hand %d  available %d  locked %d  sold %d  incoming %d\n", f.OnHand, f.Available, f.Locked, f.Sold, f.Incoming)
	fmt.Fprintf(&b, "stock's /metrics during the sale: %s\n\n", r.Metrics)

	step := r.Config.TableStep
	if step <= 0 {
		step = max(1, (len(r.Samples)+39)/40)
	}
	every := r.Config.SampleInterval * time.Duration(step)
	fmt.Fprintf(&b, "water level (every %s)\n", every)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "t\tavailable\tlocked\tsold\ton_hand\torders\t\n")
	for i, s := range r.Samples {
		if i%step != 0 && i != len(r.Samples)-1 {
			continue
		}
		fmt.Fprintf(tw, "%ds\t%d\t%d\t%d\t%d\t%d\t\n", int(s.At.Round(time.Second)/time.Second), s.Available, s.Locked, s.Sold, s.OnHand, s.Orders)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case r.ChartPath != "":
		fmt.Fprintf(&b, "chart: %s\n", r.ChartPath)
	case r.ChartErr != "":
		fmt.Fprintf(&b, "chart not written: %s\n", r.ChartErr)
	}

	fmt.Fprintf(&b, "\nchecks\n")
	for _, ch := range r.Checks {
		mark := "PASS"
		if !ch.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s  %s: %s\n", mark, ch.Name, ch.Detail)
	}
	if r.Failed() {
		fmt.Fprintf(&b, "\n%d of %d checks FAILED\n", r.failedChecks(), len(r.Checks))
	} else {
		fmt.Fprintf(&b, "\nall %d checks passed\n", len(r.Checks))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String is the text rendering.
func (r *Report) String() string {
	var b strings.Builder
	_ = r.WriteText(&b)
	return b.String()
}

// orderedKeys lists m's keys in the order of known, then any others sorted.
func orderedKeys[V any](m map[string]V, known []string) []string {
	var out []string
	for _, k := range known {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains(known, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// writeTable aligns rows: the first column left, the others right.
func writeTable(b *strings.Builder, rows [][]string) {
	var width []int
	for _, r := range rows {
		if len(r) < 2 {
			continue // a section heading or a blank line does not widen the columns
		}
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", max(0, width[min(i, len(width)-1)]-utf8.RuneCountInString(c)))
			if i == 0 {
				line.WriteString(c + pad)
			} else {
				line.WriteString("  " + pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}
