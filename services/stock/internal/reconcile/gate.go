package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/stock/internal/app"
)

// Gate is the flash-sale gate job (the seed's "Redis 余量 + 已售积累 = 数据库物理库存 –
// 锁定库存; 一旦出现差异，以数据库流水为准，回刷 Redis 缓存"): for every SKU whose gate is
// due it checks remaining + due = available − in flight (app.GateView), and in repair mode
// arms a gate Redis lacks (first arming at its time, or after Redis lost it), gives back the
// units of orders the database has back, corrects a steady drift from the database, and
// disarms a gate nobody planned.
func Gate(gates *app.Gates, interval time.Duration) reconcile.Job {
	return reconcile.Job{Name: "gate", Interval: interval, Run: func(ctx context.Context, mode reconcile.Mode) (reconcile.Result, error) {
		checked, checks, err := gates.Check(ctx, mode == reconcile.Repair)
		res := reconcile.Result{Checked: checked}
		for _, c := range checks {
			res.Findings = append(res.Findings, gateFindings(c)...)
		}
		return res, err
	}}
}

func gateFindings(c app.GateCheck) []reconcile.Finding {
	v := c.View
	ids := map[string]string{"sku": v.SKU}
	values := map[string]int64{"available": v.Available, "remaining": v.Remaining, "in_flight": v.InFlight, "due": v.Due, "drift": v.Drift}
	var fs []reconcile.Finding
	add := func(kind, detail string, repaired bool) {
		f := reconcile.Finding{Kind: kind, IDs: ids, Values: values, Detail: detail, Repaired: repaired}
		if c.Err != nil {
			f.Error = c.Err.Error()
		}
		fs = append(fs, f)
	}
	switch {
	case c.Unplanned:
		add("gate_unplanned", "Redis holds a gate no plan asks for", c.Disarmed)
		return fs
	case c.Armed:
		add("gate_not_armed", fmt.Sprintf("the gate was due and Redis did not have it: armed with the database's available, %d", v.Remaining), c.Err == nil)
	case !v.Armed:
		add("gate_not_armed", "the gate is due and Redis does not have it", false)
	}
	if n := len(c.Due); n > 0 {
		add("gate_return_missing", fmt.Sprintf("%d orders the database has back (or never saw) still held units at the gate: %s", n, short(c.Due)), c.GaveBack)
	}
	if c.Drift != 0 {
		add("gate_drift", fmt.Sprintf("the gate was off by %d twice in a row; the database wins", c.Drift), c.Adjusted)
	} else if v.Drift != 0 {
		add("gate_drift_moving", fmt.Sprintf("the gate is off by %d while takes and locks are in flight; checked again next run", v.Drift), false)
	}
	if len(fs) == 0 && c.Err != nil {
		add("gate_check_failed", "the gate could not be checked", false)
	}
	return fs
}

func short(ids []string) string {
	if len(ids) > 5 {
		return strings.Join(ids[:5], ", ") + fmt.Sprintf(" and %d more", len(ids)-5)
	}
	return strings.Join(ids, ", ")
}
