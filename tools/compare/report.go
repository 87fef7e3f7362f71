package compare

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Report is the comparison as the JSON file has it; a page draws it while Done is false.
type Report struct {
	StartedAt  string    `json:"started_at"` // RFC 3339
	Done       bool      `json:"done"`       // the last write: nothing changes after it
	Units      int64     `json:"units"`
	Buyers     int       `json:"buyers"`
	SecondWave int       `json:"second_wave"`
	PayRate    float64   `json:"pay_rate"`
	DeadlineMS int64     `json:"deadline_ms"`
	Designs    []*Design `json:"designs"`

	mu    sync.Mutex
	start time.Time
	cfg   Config
}

// Design is one design's books over time and what its buyers lived through.
type Design struct {
	Name    string   `json:"name"` // single-column, redis-only or stockflow
	Title   string   `json:"title"`
	Note    string   `json:"note"` // how the design works, in a sentence
	Samples []Sample `json:"samples"`
	Result  Result   `json:"result"` // zeros until the design is done
	// Error says why the design could not be run (absent when it ran).
	Error string `json:"error,omitempty"`

	refused    int64    // buyers turned away, free unit or not
	paidOrders int64    // stockflow: orders the order service says are paid (the others: buyers who paid)
	defects    []string // stockflow: broken promises found beyond the result's figures
	done       bool
}

// Sample is a reading of a design's own books. The naive designs have one number: available
// is it (below zero once oversold), locked is 0 and sold is what it lost since the sale began
// — paid or not, the books cannot tell.
type Sample struct {
	TMS       int64 `json:"t_ms"` // since started_at
	Available int64 `json:"available"`
	Locked    int64 `json:"locked"`
	Sold      int64 `json:"sold"`
}

// Result is what happened to a design's units and buyers, measured from the buyers' side and
// checked against the books.
type Result struct {
	Sold           int64 `json:"sold"`             // units paid for
	Oversold       int64 `json:"oversold"`         // units handed out beyond the units there were
	Stuck          int64 `json:"stuck"`            // units held at the end by buyers who never paid
	TurnedAway     int64 `json:"turned_away"`      // buyers told "sold out" while a unit was really free
	SecondWaveSold int64 `json:"second_wave_sold"` // units the second wave paid for
	Orders         int64 `json:"orders"`           // orders (buyers) that got a unit
}

var designInfo = map[string][2]string{
	SingleColumn: {"One stock column in PostgreSQL",
		"Each buyer reads stock, checks it is above zero in code and runs UPDATE sku SET stock = stock - 1 — three statements, no lock state — so buyers who read the same stock all take a unit, and an unpaid unit never comes back."},
	RedisOnly: {"A Redis counter as the only truth",
		"Each buyer GETs the counter, checks it is above zero and DECRs it — Redis is the only record — so buyers who read the same count all take a unit, and an unpaid unit never comes back."},
	Stockflow: {"stockflow: lock, sell, release",
		"An order locks a unit in stock's ledger (available → locked) only if one is available, a payment sells it (locked → sold), and the timeout service releases an unpaid lock at its deadline (locked → available) for the next buyer."},
}

func newReport(cfg Config, start time.Time) *Report {
	r := &Report{StartedAt: start.UTC().Format(time.RFC3339), Units: cfg.Units, Buyers: cfg.Buyers, SecondWave: cfg.SecondWave,
		PayRate: cfg.PayRate, DeadlineMS: cfg.Deadline.Milliseconds(), start: start, cfg: cfg}
	for _, name := range []string{SingleColumn, RedisOnly, Stockflow} {
		r.Designs = append(r.Designs, &Design{Name: name, Title: designInfo[name][0], Note: designInfo[name][1], Samples: []Sample{}})
	}
	return r
}

// Design returns the named design's part of the report (nil: no such design).
func (r *Report) Design(name string) *Design {
	for _, d := range r.Designs {
		if d.Name == name {
			return d
		}
	}
	return nil
}

func (r *Report) design(name string) *Design { return r.Design(name) }

func (r *Report) sample(d *Design, available, locked, sold int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d.Samples = append(d.Samples, Sample{TMS: time.Since(r.start).Milliseconds(), Available: available, Locked: locked, Sold: sold})
}

func (r *Report) result(d *Design, res Result, refused, paidOrders int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d.Result, d.refused, d.paidOrders, d.done = res, refused, paidOrders, true
}

func (r *Report) fail(d *Design, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d.Error = err.Error()
}

func (r *Report) defect(text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.design(Stockflow)
	d.defects = append(d.defects, text)
}

func (r *Report) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Done = true
}

// Defects are the promises stockflow broke in this run: any unit oversold, any unit stuck
// with an unpaid order, units sold other than its paid orders, an order that never settled.
// The naive designs break these by design; that is their result, not a defect.
func (r *Report) Defects() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.defects()
}

func (r *Report) defects() []string {
	d := r.design(Stockflow)
	if !d.done {
		return nil // it did not run: that is the run's error
	}
	out := append([]string(nil), d.defects...)
	if d.Result.Oversold > 0 {
		out = append(out, fmt.Sprintf("%d units oversold", d.Result.Oversold))
	}
	if d.Result.Stuck > 0 {
		out = append(out, fmt.Sprintf("%d units still locked after every deadline", d.Result.Stuck))
	}
	if d.Result.Sold != d.paidOrders {
		out = append(out, fmt.Sprintf("stock sold %d units, the order service has %d paid orders", d.Result.Sold, d.paidOrders))
	}
	return out
}

// keepWriting writes the report to path every period until ctx ends, then once more; a
// reader never sees half a file (write a temporary file, then rename it over the report).
func (r *Report) keepWriting(ctx context.Context, path string, period time.Duration) error {
	if path == "" {
		<-ctx.Done()
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return r.write(path)
		case <-tick.C:
			if err := r.write(path); err != nil {
				return err
			}
		}
	}
}

func (r *Report) write(path string) error {
	r.mu.Lock()
	b, err := json.MarshalIndent(r, "", " ")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteText prints the scenario, the designs side by side, and what each one is.
func (r *Report) WriteText(w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cfg
	var b strings.Builder
	fmt.Fprintf(&b, "The same flash sale on three designs, side by side (seed %d):\n", c.Seed)
	fmt.Fprintf(&b, "  %d units; %d buyers arrive over %s, one unit each; %.0f%% of those who get one pay within %s, the rest never do;\n",
		c.Units, c.Buyers, c.Arrivals, 100*c.PayRate, time.Duration(payWithin*float64(c.Deadline)))
	fmt.Fprintf(&b, "  the deadline to pay is %s; %s after the first wave's last deadline %d more buyers arrive over %s, and they all pay.\n",
		c.Deadline, c.Grace, c.SecondWave, c.Arrivals)
	fmt.Fprintf(&b, "  The naive designs' buyers pause %s between reading the stock and decrementing it; every design's buyers share %d connections.\n\n",
		c.Think, poolSize)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, f func(*Design) string) {
		fmt.Fprintf(tw, "%s\t", label)
		for _, d := range r.Designs {
			fmt.Fprintf(tw, "%s\t", f(d))
		}
		fmt.Fprintln(tw)
	}
	num := func(f func(*Design) int64) func(*Design) string {
		return func(d *Design) string {
			if !d.done {
				return "-"
			}
			return fmt.Sprint(f(d))
		}
	}
	row("", func(d *Design) string { return d.Name })
	row("units", func(*Design) string { return fmt.Sprint(r.Units) })
	row("units sold (paid)", num(func(d *Design) int64 { return d.Result.Sold }))
	row("oversold", num(func(d *Design) int64 { return d.Result.Oversold }))
	row("stuck with unpaid buyers at the end", num(func(d *Design) int64 { return d.Result.Stuck }))
	row("turned away while a unit was free", num(func(d *Design) int64 { return d.Result.TurnedAway }))
	row("sold in the second wave", num(func(d *Design) int64 { return d.Result.SecondWaveSold }))
	row("orders that got a unit", num(func(d *Design) int64 { return d.Result.Orders }))
	row("buyers turned away (all)", num(func(d *Design) int64 { return d.refused }))
	row("available by its books at the end", num(func(d *Design) int64 {
		if len(d.Samples) == 0 {
			return 0
		}
		return d.Samples[len(d.Samples)-1].Available
	}))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(&b)
	if sf := r.design(Stockflow); sf.done {
		if ds := r.defects(); len(ds) > 0 {
			fmt.Fprintf(&b, "stockflow BROKE ITS PROMISES: %s\n\n", strings.Join(ds, "; "))
		} else {
			fmt.Fprintf(&b, "stockflow: nothing oversold, nothing stuck, %d units sold = %d paid orders.\n\n", sf.Result.Sold, sf.paidOrders)
		}
	}
	for _, d := range r.Designs {
		fmt.Fprintf(&b, "%s — %s: %s\n", d.Name, d.Title, d.Note)
		if d.Error != "" {
			fmt.Fprintf(&b, "  NOT RUN: %s\n", d.Error)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
