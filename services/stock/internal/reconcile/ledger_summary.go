package reconcile

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// LedgerSummary is job 5: every SKU's summary against the fold of its ledger and its lock
// rows (Service.Verify), each difference reported with both figures. Repair rebuilds
// the summaries from the ledger (Service.Rebuild: the ledger wins) when a ledger_fold
// difference was found; a difference a rebuild cannot fix (lock rows that disagree with the
// ledger, a broken ledger chain) stays a finding for a human. An oversold slot (sold + locked
// > on_hand, or available < 0) is a finding of kind summary_oversell, and Verify counts it in
// stockflow.stock.oversell: the alert that must never fire.
func LedgerSummary(svc *app.Service, interval time.Duration) reconcile.Job {
	return reconcile.Job{Name: "ledger_summary", Interval: interval, Run: func(ctx context.Context, mode reconcile.Mode) (reconcile.Result, error) {
		var res reconcile.Result
		diffs, err := svc.Verify(ctx)
		if err != nil {
			return res, err
		}
		if res.Checked, err = svc.CountSKUs(ctx); err != nil {
			return res, err
		}
		var rebuilt []string
		if mode == reconcile.Repair && slices.ContainsFunc(diffs, func(d stock.Difference) bool { return d.Check == "ledger_fold" }) {
			if rebuilt, err = svc.Rebuild(ctx); err != nil {
				return res, err
			}
		}
		left := map[string]bool{}
		if len(rebuilt) > 0 {
			after, err := svc.Verify(ctx)
			if err != nil {
				return res, err
			}
			for _, d := range after {
				left[d.SKU+"/"+d.Check+"/"+d.Field] = true
			}
		}
		for _, d := range diffs {
			f := reconcile.Finding{Kind: "summary_" + d.Check, IDs: map[string]string{"sku": d.SKU, "field": d.Field},
				Values: map[string]int64{"summary": d.Summary, "expected": d.Expect},
				Detail: fmt.Sprintf("%s %s: summary %d, %s says %d", d.SKU, d.Field, d.Summary, d.Check, d.Expect)}
			if d.Check == app.CheckOversell {
				f.Detail = fmt.Sprintf("%s slot %d oversold: %d units promised beyond on_hand", d.SKU, d.Slot, -d.Summary)
			}
			if d.Detail != "" {
				f.Detail += " (" + d.Detail + ")"
			}
			if slices.Contains(rebuilt, d.SKU) && !left[d.SKU+"/"+d.Check+"/"+d.Field] {
				f.Repaired = true
				f.Detail += "; summary rebuilt from the ledger"
			}
			res.Findings = append(res.Findings, f)
		}
		return res, nil
	}}
}
