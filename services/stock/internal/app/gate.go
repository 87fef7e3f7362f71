package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// ErrGateUnavailable: the stock service has no Redis (REDIS_URL), or Redis does not answer.
var ErrGateUnavailable = errors.New("flash-sale gate unavailable")

// GatePlan says that a SKU's flash-sale gate should be armed from ArmAt on.
type GatePlan struct {
	SKU   string
	ArmAt time.Time
	By    string // who asked
}

// OrderFate is what the database says of an order the gate holds units for.
type OrderFate int

// Fates. An order the database does not know yet is in flight (its order.created has not
// been locked yet).
const (
	FateHeld     OrderFate = iota + 1 // its lock holds the units: locked, sold or shipped
	FateReturned                      // rejected, released or restocked: the gate should have them back
)

// GateFigures are the database's side of a gate check, from one snapshot.
type GateFigures struct {
	Available int64
	Fates     map[string]OrderFate // by order id, for the orders the gate holds that stock knows
}

// GateStore keeps the gate plans and reads the figures a gate check compares.
type GateStore interface {
	// PutGate stores or replaces a plan; stock.ErrUnknownSKU for a SKU that does not exist.
	PutGate(ctx context.Context, p GatePlan) error
	// DeleteGate removes sku's plan, reporting whether there was one.
	DeleteGate(ctx context.Context, sku string) (bool, error)
	// GatePlans returns every plan, by SKU.
	GatePlans(ctx context.Context) ([]GatePlan, error)
	// GatePlan returns sku's plan and whether there is one.
	GatePlan(ctx context.Context, sku string) (GatePlan, bool, error)
	// GateFigures reads sku's available in a snapshot taken before read runs, then the fate
	// of the orders read returns, in the same snapshot; stock.ErrUnknownSKU for no such SKU.
	GateFigures(ctx context.Context, sku string, read func() ([]string, error)) (GateFigures, error)
}

// Gates arms, disarms and checks the flash-sale gate of SKUs (pkg/gate) from the database,
// which stays the authority: the gate only filters who may try.
type Gates struct {
	store     GateStore
	gate      *gate.Gate // nil: no Redis
	orphanAge time.Duration
	now       func() time.Time
}

// NewGates returns the gate use cases on store and g. A take older than orphanAge that stock
// has no order for is an orphan (the order was never stored, or its order.created is lost)
// and is given back.
func NewGates(store GateStore, g *gate.Gate, orphanAge time.Duration) *Gates {
	return &Gates{store: store, gate: g, orphanAge: orphanAge, now: time.Now}
}

// GateView is a SKU's gate: the plan, Redis's side and the database's, and how they differ.
type GateView struct {
	SKU       string    `json:"sku"`
	Planned   bool      `json:"planned"`
	ArmAt     time.Time `json:"arm_at,omitzero"`
	ArmedBy   string    `json:"armed_by,omitempty"`
	Armed     bool      `json:"armed"`
	ArmedAt   time.Time `json:"armed_at,omitzero"`
	Remaining int64     `json:"remaining"`   // what Redis will still admit
	HeldUnits int64     `json:"held_units"`  // units of takes not given back
	HeldBy    int       `json:"held_orders"` // orders holding them
	Available int64     `json:"available"`   // the database's available
	InFlight  int64     `json:"in_flight"`   // units taken for orders stock has not seen yet
	Due       int64     `json:"due"`         // units the gate should have back (rejected, released, orphaned)
	// Drift is what Redis is off by: (available − in_flight) − (remaining + due). Positive:
	// the gate turns away buyers the database could serve; negative: it admits more than
	// there is (harmless — the database lock refuses them — but wasteful).
	Drift int64 `json:"drift"`

	dueOrders []string
}

// Arm plans sku's gate from at (zero: now) and, when that is now or past, arms it from the
// database at once. Errors: stock.ErrBadSKU, stock.ErrUnknownSKU, ErrGateUnavailable.
func (g *Gates) Arm(ctx context.Context, sku string, at time.Time, by string) (GateView, error) {
	if err := stock.ValidSKU(sku); err != nil {
		return GateView{}, err
	}
	if g.gate == nil {
		return GateView{}, fmt.Errorf("arm gate %s: %w: no REDIS_URL", sku, ErrGateUnavailable)
	}
	now := g.now()
	if at.IsZero() || at.Before(now) {
		at = now
	}
	if err := g.store.PutGate(ctx, GatePlan{SKU: sku, ArmAt: at.UTC().Truncate(time.Microsecond), By: by}); err != nil {
		return GateView{}, fmt.Errorf("arm gate: %w", err)
	}
	if !at.After(now) {
		if _, err := g.sync(ctx, sku); err != nil {
			return GateView{}, err
		}
	}
	return g.View(ctx, sku)
}

// Disarm forgets sku's plan and removes its gate: its orders take the database path again.
// Disarming a SKU without a gate changes nothing.
func (g *Gates) Disarm(ctx context.Context, sku string) (GateView, error) {
	if err := stock.ValidSKU(sku); err != nil {
		return GateView{}, err
	}
	if _, err := g.store.DeleteGate(ctx, sku); err != nil {
		return GateView{}, err
	}
	if err := g.gate.Disarm(ctx, sku); err != nil {
		return GateView{}, fmt.Errorf("disarm gate: %w: %w", ErrGateUnavailable, err)
	}
	return g.View(ctx, sku)
}

// View measures sku's gate against the database, changing nothing.
func (g *Gates) View(ctx context.Context, sku string) (GateView, error) {
	if err := stock.ValidSKU(sku); err != nil {
		return GateView{}, err
	}
	plan, planned, err := g.store.GatePlan(ctx, sku)
	if err != nil {
		return GateView{}, err
	}
	v, err := g.measure(ctx, sku)
	if err != nil {
		return GateView{}, err
	}
	v.Planned, v.ArmAt, v.ArmedBy = planned, plan.ArmAt, plan.By
	return v, nil
}

// measure reads Redis's state inside the database snapshot and compares.
func (g *Gates) measure(ctx context.Context, sku string) (GateView, error) {
	v := GateView{SKU: sku}
	var st gate.State
	figs, err := g.store.GateFigures(ctx, sku, func() ([]string, error) {
		var err error
		if st, err = g.gate.State(ctx, sku); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrGateUnavailable, err)
		}
		ids := make([]string, len(st.Held))
		for i, h := range st.Held {
			ids[i] = h.OrderID
		}
		return ids, nil
	})
	if err != nil {
		return GateView{}, err
	}
	v.Armed, v.ArmedAt, v.Remaining, v.Available = st.Armed, st.ArmedAt, st.Remaining, figs.Available
	now := g.now()
	for _, h := range st.Held {
		v.HeldUnits += h.Qty
		v.HeldBy++
		switch fate, known := figs.Fates[h.OrderID]; {
		case known && fate == FateHeld:
		case known, now.Sub(h.TakenAt) > g.orphanAge:
			v.Due += h.Qty
			v.dueOrders = append(v.dueOrders, h.OrderID)
		default:
			v.InFlight += h.Qty
		}
	}
	if v.Armed {
		v.Drift = (v.Available - v.InFlight) - (v.Remaining + v.Due)
	}
	return v, nil
}

// GateCheck is what one check of one SKU found and did.
type GateCheck struct {
	View GateView
	// Armed: the SKU was due and Redis did not have it (first arming, or Redis lost it), so
	// it was armed from the database (repair only).
	Armed bool
	// Due are orders whose units the gate still held though the database has them back (or
	// that stock never saw, past the orphan age); GaveBack says this run gave them back.
	Due      []string
	GaveBack bool
	// Drift is the difference seen twice in a row, a moment apart, and so not a take or a
	// lock in flight; Adjusted says it was repaired.
	Drift    int64
	Adjusted bool
	// Unplanned: Redis holds a gate for a SKU without a plan (disarmed meanwhile, or by
	// hand); Disarmed says this run removed it (repair only).
	Unplanned, Disarmed bool
	Err                 error
}

// settle is how long Check waits before measuring a drift again.
const settle = 250 * time.Millisecond

// Check compares every planned and due SKU's gate with the database; with repair it arms
// what Redis lacks, gives back what the database has back, and corrects a drift that stays
// the same across two measurements. It also disarms gates Redis holds without a plan.
// It returns the plans checked and one GateCheck per SKU with something to report.
func (g *Gates) Check(ctx context.Context, repair bool) (checked int, out []GateCheck, err error) {
	if g.gate == nil {
		return 0, nil, nil
	}
	// Redis first, then the plans: Arm stores a plan before it arms Redis, so a gate seen
	// here has its plan in what is read next. The other order took a gate an operator armed
	// between the two reads for one without a plan, and disarmed it as a storm began.
	armed, err := g.gate.Armed(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrGateUnavailable, err)
	}
	plans, err := g.store.GatePlans(ctx)
	if err != nil {
		return 0, nil, err
	}
	planned := map[string]bool{}
	now := g.now()
	for _, p := range plans {
		planned[p.SKU] = true
		if p.ArmAt.After(now) {
			continue
		}
		checked++
		c := g.check(ctx, p.SKU, repair)
		if c.Err != nil || c.Armed || len(c.Due) > 0 || c.Drift != 0 || c.View.Drift != 0 || !c.View.Armed {
			out = append(out, c)
		}
	}
	for _, sku := range armed {
		if planned[sku] {
			continue
		}
		c := GateCheck{View: GateView{SKU: sku, Armed: true}, Unplanned: true}
		if repair {
			c.Err = g.gate.Disarm(ctx, sku)
			c.Disarmed = c.Err == nil
		}
		out = append(out, c)
	}
	return checked, out, nil
}

func (g *Gates) check(ctx context.Context, sku string, repair bool) GateCheck {
	if !repair {
		v, err := g.measure(ctx, sku)
		return GateCheck{View: v, Due: v.dueOrders, Err: err}
	}
	c, err := g.sync(ctx, sku)
	c.Err = err
	return c
}

// sync brings sku's gate in line with the database: arms it when Redis lacks it, gives back
// what is due and corrects a steady drift.
func (g *Gates) sync(ctx context.Context, sku string) (GateCheck, error) {
	v, err := g.measure(ctx, sku)
	c := GateCheck{View: v}
	if err != nil {
		return c, err
	}
	if !v.Armed {
		// Nothing is known in flight (Redis lost the takes, or there were none yet): the
		// database's available is the best figure, and any excess is refused by the lock.
		if err := g.gate.Arm(ctx, sku, v.Available); err != nil {
			return c, fmt.Errorf("%w: %w", ErrGateUnavailable, err)
		}
		c.Armed = true
		c.View, err = g.measure(ctx, sku)
		return c, err
	}
	c.Due = v.dueOrders
	for _, id := range v.dueOrders {
		if _, err := g.gate.GiveBack(ctx, id); err != nil {
			return c, fmt.Errorf("%w: %w", ErrGateUnavailable, err)
		}
	}
	c.GaveBack = len(c.Due) > 0
	if v.Drift == 0 {
		return c, nil
	}
	select {
	case <-ctx.Done():
		return c, ctx.Err()
	case <-time.After(settle):
	}
	again, err := g.measure(ctx, sku)
	if err != nil {
		return c, err
	}
	c.View = again
	if again.Drift != v.Drift {
		return c, nil // moving: takes and locks in flight; the next run looks again
	}
	c.Drift = again.Drift
	if _, _, err := g.gate.Adjust(ctx, sku, again.Drift); err != nil {
		return c, fmt.Errorf("%w: %w", ErrGateUnavailable, err)
	}
	c.Adjusted = true
	return c, nil
}
