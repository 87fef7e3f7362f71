package loadtest

import (
	"fmt"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stockflow/stockflow/tools/flashsale"
)

// Report is what one run measured.
type Report struct {
	Config Config
	Buyers []string // the buyer_ids of the run's orders, which go to them in turn

	Sent     int           // requests vegeta sent
	SentRate float64       // their rate per second
	Elapsed  time.Duration // first request to last response
	Accepted int           // 2xx answers with an order id
	Codes    map[int]int   // answers by HTTP status; 0 is a transport error or timeout
	Errors   []string      // the first distinct errors vegeta saw
	PostP50  time.Duration // HTTP response time of POST /v1/orders
	PostP99  time.Duration

	// POST → awaiting_payment over the accepted orders that were not rejected; an order that
	// had not reached it when the grace period ended counts as slower than any that did.
	Awaited, NotAwaited int
	AwaitP50, AwaitP99  time.Duration // -1: beyond the grace period
	ReachedP50          time.Duration // over the orders that reached awaiting_payment only
	ReachedP99          time.Duration
	Settled             time.Time // when the orders were last listed

	ByStatus map[string]int // final status of every order the buyer has
	Unacked  int            // orders that exist although their POST got no 2xx (e.g. a client timeout)
	Unlisted int            // accepted orders the order API does not list

	Before, After flashsale.SKUFigures
	RSSReset      bool  // VmHWM was reset before the attack (else: peak since the process started)
	PeakRSS       int64 // bytes
	RSSErr        error

	// CPU is each of Config.Procs' CPU time over CPUWindow: from the attack's start until the
	// stock service had locked every accepted order and the processes were back at rest.
	CPU       []CPUUse
	CPUWindow time.Duration
	WALBytes  int64 // WAL the PostgreSQL server wrote over the same window
	WALErr    error
	// Autovacuums is how many autovacuum and autoanalyze runs finished over the same window,
	// in every database of the server: PostgreSQL's CPU per order moves with them.
	Autovacuums    int64
	AutovacuumsErr error
	// PGShares splits PostgreSQL's CPU time over the same window by database (client
	// backends) and by background process, for a server on this machine.
	PGShares    []PGShare
	PGSharesErr error

	Checks []Check
}

// Check is one correctness check.
type Check struct {
	Name   string
	Pass   bool
	Detail string
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Checks, func(c Check) bool { return !c.Pass })
}

// AcceptedPerSec is the accepted orders over the attack's span.
func (r *Report) AcceptedPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Accepted) / r.Elapsed.Seconds()
}

// tally joins the accepted orders (id → when vegeta sent the POST) with the listed ones.
func (r *Report) tally(accepted map[string]time.Time, orders []listedOrder) {
	var lat []time.Duration
	listed := map[string]bool{}
	for _, o := range orders {
		listed[o.OrderID] = true
		r.ByStatus[o.Status]++
		sent, ok := accepted[o.OrderID]
		if !ok {
			r.Unacked++
			continue
		}
		if o.Status == "rejected" {
			continue
		}
		if at, ok := awaitingAt(o); ok {
			lat = append(lat, at.Sub(sent))
		} else {
			r.NotAwaited++
		}
	}
	for id := range accepted {
		if !listed[id] {
			r.Unlisted++
			r.NotAwaited++
		}
	}
	slices.Sort(lat)
	r.Awaited = len(lat)
	r.AwaitP50 = percentile(lat, r.NotAwaited, 0.50)
	r.AwaitP99 = percentile(lat, r.NotAwaited, 0.99)
	r.ReachedP50, r.ReachedP99 = percentile(lat, 0, 0.50), percentile(lat, 0, 0.99)
}

func awaitingAt(o listedOrder) (time.Time, bool) {
	for _, h := range o.History {
		if h.Status == "awaiting_payment" {
			return h.At, true
		}
	}
	return time.Time{}, false
}

// percentile is the nearest-rank p-quantile of sorted plus beyond values larger than all of
// them; -1 when it falls among those, 0 when there are none.
func percentile(sorted []time.Duration, beyond int, p float64) time.Duration {
	n := len(sorted) + beyond
	if n == 0 {
		return 0
	}
	i := max(int(math.Ceil(p*float64(n)))-1, 0)
	if i >= len(sorted) {
		return -1
	}
	return sorted[i]
}

// check records the correctness checks: no oversell, the locks gained are the orders that
// reached awaiting_payment, the ledger folds to the summary, no accepted order is lost.
func (r *Report) check(v flashsale.VerifyReport) {
	a := r.After
	sum := a.Available + a.Locked + a.Sold
	r.Checks = append(r.Checks,
		Check{"no oversell", a.Available >= 0 && a.OnHand == sum,
			fmt.Sprintf("available %d >= 0, on_hand %d = available + locked + sold = %d", a.Available, a.OnHand, sum)})
	gained, awaiting, pending := a.Locked-r.Before.Locked, int64(r.ByStatus["awaiting_payment"]), int64(r.ByStatus["pending"])
	r.Checks = append(r.Checks,
		Check{"locks match orders", awaiting <= gained && gained <= awaiting+pending,
			fmt.Sprintf("locked +%d units; %d orders awaiting_payment, %d still pending (1 unit each)", gained, awaiting, pending)},
		Check{"ledger folds to summary", v.Consistent, fmt.Sprintf("POST /v1/admin/verify: %d differences", len(v.Differences))},
		Check{"no accepted order lost", r.Unlisted == 0, fmt.Sprintf("%d accepted orders not listed by the order API", r.Unlisted)})
}

// WriteText prints the report.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	fmt.Fprintf(&b, "load: POST /v1/orders at %d/s for %s on %s, 1 unit each, %d available before\n", cfg.Rate, cfg.Duration, cfg.SKU, r.Before.Available)
	fmt.Fprintf(&b, "sent:      %d requests at %.1f/s (target %d/s; vegeta, at most %d in flight)\n", r.Sent, r.SentRate, cfg.Rate, cfg.MaxWorkers)
	fmt.Fprintf(&b, "accepted:  %d (2xx) = %.1f orders/s over %s\n", r.Accepted, r.AcceptedPerSec(), r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "answers:  ")
	for _, code := range slices.Sorted(maps.Keys(r.Codes)) {
		name := fmt.Sprint(code)
		if code == 0 {
			name = "no answer"
		}
		fmt.Fprintf(&b, " %s: %d", name, r.Codes[code])
	}
	fmt.Fprintln(&b)
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "  error: %s\n", e)
	}
	fmt.Fprintf(&b, "POST answered:            p50 %s  p99 %s\n", ms(r.PostP50), ms(r.PostP99))
	fmt.Fprintf(&b, "POST → awaiting_payment:  p50 %s  p99 %s  (%d orders reached it; %d had not within %s after the attack)\n",
		ms(r.AwaitP50), ms(r.AwaitP99), r.Awaited, r.NotAwaited, cfg.Grace)
	if r.NotAwaited > 0 && r.Awaited > 0 {
		fmt.Fprintf(&b, "  of the %d that reached it: p50 %s  p99 %s\n", r.Awaited, ms(r.ReachedP50), ms(r.ReachedP99))
	}
	fmt.Fprintf(&b, "orders by status:        ")
	for _, s := range slices.Sorted(maps.Keys(r.ByStatus)) {
		fmt.Fprintf(&b, " %s %d", s, r.ByStatus[s])
	}
	fmt.Fprintf(&b, "  (locked = awaiting_payment, rejected = lock refused; %d created without a 2xx answer)\n", r.Unacked)
	fmt.Fprintf(&b, "stock %s: on_hand %d available %d locked %d sold %d (before: available %d locked %d)\n",
		cfg.SKU, r.After.OnHand, r.After.Available, r.After.Locked, r.After.Sold, r.Before.Available, r.Before.Locked)
	fmt.Fprintf(&b, "stock service peak RSS:   %s\n", r.rss())
	r.writeCPU(&b)
	fmt.Fprintln(&b, "checks:")
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "  %s  %s: %s\n", passFail(c.Pass, "PASS", "FAIL"), c.Name, c.Detail)
	}
	fmt.Fprintln(&b, "targets (issue 5):")
	fmt.Fprintf(&b, "  %s  >= 3000 orders/s accepted for 60 s: %.1f/s for %s\n", passFail(r.AcceptedPerSec() >= 3000 && cfg.Duration >= time.Minute, "met", "not met"), r.AcceptedPerSec(), cfg.Duration)
	fmt.Fprintf(&b, "  %s  p99 POST → awaiting_payment <= 500 ms: %s\n", passFail(r.AwaitP99 >= 0 && r.AwaitP99 <= 500*time.Millisecond, "met", "not met"), ms(r.AwaitP99))
	fmt.Fprintf(&b, "  %s  stock service RSS < 200 MiB: %s\n", passFail(r.RSSErr == nil && r.PeakRSS < 200<<20, "met", "not met"), r.rss())
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) rss() string {
	if r.RSSErr != nil {
		return "not measured (" + r.RSSErr.Error() + ")"
	}
	since := "since the attack began"
	if !r.RSSReset {
		since = "since the process started"
	}
	return fmt.Sprintf("%.1f MiB (VmHWM, %s)", float64(r.PeakRSS)/(1<<20), since)
}

func ms(d time.Duration) string {
	if d < 0 {
		return "beyond the grace period"
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

func passFail(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// writeCPU prints the CPU table: per process, CPU-ms over the window and per accepted order,
// the rate at rest and the per-order cost above it; then the total, the WAL per order and
// what this machine's cores could carry at that cost.
func (r *Report) writeCPU(b *strings.Builder) {
	if len(r.CPU) == 0 {
		return
	}
	fmt.Fprintf(b, "CPU per accepted order (/proc/<pid>/stat utime+stime over %s: the attack, until every accepted order was locked and the processes were back at rest; %d orders):\n",
		r.CPUWindow.Round(100*time.Millisecond), r.Accepted)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  process\tpid\tCPU ms\tms/order\tat rest ms/s\tms/order above rest\t")
	var total, idle, above float64
	partial := false
	for _, u := range r.CPU {
		if u.Note != "" {
			partial = true
			fmt.Fprintf(tw, "  %s\t%s\t\t\t\t\t%s\n", u.Name, pid(u.PID), u.Note)
			continue
		}
		per, _ := perOrder(u.Ms, r.Accepted)
		rest, up := "n/a", "n/a"
		if u.IdleMsPerSec >= 0 {
			a, _ := perOrder(aboveIdle(u.Ms, u.IdleMsPerSec, r.CPUWindow), r.Accepted)
			rest, up = fmt.Sprintf("%.1f", u.IdleMsPerSec), fmt.Sprintf("%.3f", a)
			idle += u.IdleMsPerSec
			above += aboveIdle(u.Ms, u.IdleMsPerSec, r.CPUWindow)
		}
		total += u.Ms
		fmt.Fprintf(tw, "  %s\t%s\t%.0f\t%.3f\t%s\t%s\t\n", u.Name, pid(u.PID), u.Ms, per, rest, up)
	}
	perTotal, ok := perOrder(total, r.Accepted)
	perAbove, _ := perOrder(above, r.Accepted)
	fmt.Fprintf(tw, "  total\t\t%.0f\t%.3f\t%.1f\t%.3f\t\n", total, perTotal, idle, perAbove)
	_ = tw.Flush()
	if partial {
		fmt.Fprintln(b, "  (the total leaves out the processes without a figure)")
	}
	if r.WALErr != nil {
		fmt.Fprintf(b, "  PostgreSQL WAL: not measured (%v)\n", r.WALErr)
	} else if w, ok := perOrder(float64(r.WALBytes), r.Accepted); ok {
		fmt.Fprintf(b, "  PostgreSQL WAL: %.1f MiB = %.0f bytes per order (pg_current_wal_lsn before and after, the whole server)\n", float64(r.WALBytes)/(1<<20), w)
	}
	if r.AutovacuumsErr != nil {
		fmt.Fprintf(b, "  PostgreSQL autovacuum: not measured (%v)\n", r.AutovacuumsErr)
	} else {
		fmt.Fprintf(b, "  PostgreSQL autovacuum: %d table runs (vacuum or analyze) finished in the window; its CPU is in PostgreSQL's figure\n", r.Autovacuums)
	}
	r.writePGShares(b)
	if !ok {
		return
	}
	cores := runtime.NumCPU()
	fmt.Fprintf(b, "  at %.3f CPU-ms per order, %d cores (%d ms of CPU per second) carry at most %.0f orders/s\n",
		perTotal, cores, cores*1000, ordersPerSecOn(cores, 0, perTotal))
	if idle > 0 && perAbove > 0 {
		fmt.Fprintf(b, "  at %.3f above rest, after %.0f ms/s at rest: (%d − %.0f) ÷ %.3f = %.0f orders/s\n",
			perAbove, idle, cores*1000, idle, perAbove, ordersPerSecOn(cores, idle, perAbove))
	}
}

// writePGShares prints PostgreSQL's CPU per order by database and background process.
func (r *Report) writePGShares(b *strings.Builder) {
	if r.PGSharesErr != nil {
		fmt.Fprintf(b, "  PostgreSQL by process: not measured (%v)\n", r.PGSharesErr)
		return
	}
	if len(r.PGShares) == 0 || r.Accepted <= 0 {
		return
	}
	parts := make([]string, 0, len(r.PGShares))
	sum := 0.0
	for _, s := range r.PGShares {
		per, _ := perOrder(s.Ms, r.Accepted)
		parts = append(parts, fmt.Sprintf("%s %.3f", s.Group, per))
		sum += s.Ms
	}
	all, _ := perOrder(sum, r.Accepted)
	fmt.Fprintf(b, "  PostgreSQL by process, ms per order: %s (%.3f in all; the rest of its figure is processes that ended in the window, autovacuum workers among them)\n",
		strings.Join(parts, ", "), all)
}

func pid(p int) string {
	if p == 0 {
		return "-"
	}
	return fmt.Sprint(p)
}
