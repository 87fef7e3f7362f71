package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the run's fault timeline, what the sale did and the check table.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	form := "short"
	if r.Long {
		form = "long"
	}
	fmt.Fprintf(&b, "\nchaos run (%s form, seed %d, %d NATS node(s)) in %s\n\nFault timeline (since the sale opened):\n", form, r.Seed, r.Nodes, r.Duration.Round(time.Second))
	for _, e := range r.Timeline {
		mark := ""
		if e.Err != "" {
			mark = "  ← FAILED"
		}
		fmt.Fprintf(&b, "  %8s  %s%s\n", e.At.Round(100*time.Millisecond), e.Text, mark)
	}
	b.WriteString("\nFaults injected:\n")
	tw := tabwriter.NewWriter(&b, 2, 0, 2, ' ', 0)
	for _, k := range Kinds {
		fmt.Fprintf(tw, "  %s\t%d\n", k, r.Injected[k])
	}
	_ = tw.Flush()
	var svcs []string
	for svc := range r.Restarts {
		svcs = append(svcs, svc)
	}
	slices.Sort(svcs)
	b.WriteString("Restarts by the keeper:")
	for _, svc := range svcs {
		fmt.Fprintf(&b, " %s %d", svc, r.Restarts[svc])
	}
	b.WriteString("\n")
	if s := r.Sale; s != nil {
		fmt.Fprintf(&b, "\nThe sale: %d units, %d orders (%d by returning buyers), by status %v; ledger rows %v; buyers' calls that failed for good: %d\n",
			s.Config.Units, s.Orders, s.Retries, s.ByStatus, s.LedgerRows, s.Errors)
	}
	if r.SaleErr != "" {
		fmt.Fprintf(&b, "The sale ended with: %s (the table leaves out its checks faults may fail without a broken promise: %s)\n",
			r.SaleErr, strings.Join(notPromised, "; "))
	}
	b.WriteString("\nChecks:\n")
	tw = tabwriter.NewWriter(&b, 2, 0, 2, ' ', 0)
	failed := 0
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.Pass {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", mark, c.Name, c.Detail)
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\n%d of %d checks passed\n", len(r.Checks)-failed, len(r.Checks))
	_, err := io.WriteString(w, b.String())
	return err
}

// String is WriteText's text.
func (r *Report) String() string {
	var b strings.Builder
	_ = r.WriteText(&b)
	return b.String()
}
