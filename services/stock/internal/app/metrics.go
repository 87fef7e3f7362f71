package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// instrumentation is the meter name of the stock service's instruments.
const instrumentation = "github.com/stockflow/stockflow/services/stock"

// gaugeTTL is how long the gauges' figures read from the database are reused: a scrape reads
// them at most once per gaugeTTL, however many SKUs are watched and however often it comes.
const gaugeTTL = 5 * time.Second

// gaugeTimeout bounds one read of the gauges' figures.
const gaugeTimeout = 2 * time.Second

// CheckOversell is the Difference.Check of a slot seen with sold + locked > on_hand or
// available < 0: stock promised units it does not have. The store's Verify reports it; the
// Service counts it in stockflow.stock.oversell.
const CheckOversell = "oversell"

// OversellError is what the store returns when the guarded update of the summaries matched
// fewer rows than it moves: applied, the movements would have taken a figure below zero (the
// summary changed under a row lock, or a check before it was wrong). Nothing was written.
// SKUs are those of the refused update, sorted; the guard does not say which row failed it.
type OversellError struct {
	SKUs   []string
	Detail string
}

func (e *OversellError) Error() string { return e.Detail }

// Option configures a Service built by New or NewCombining.
type Option func(*options)

type options struct {
	meters       metric.MeterProvider
	watch        []string
	overdueGrace time.Duration
	now          func() time.Time // WithClock
}

// WithMeterProvider makes the Service's instruments on mp instead of the global
// MeterProvider (tests read them through a manual reader).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meters = mp }
}

// WithWatchedSKUs makes stockflow.stock.sku.quantity report the figures of skus
// (STOCK_WATCH_SKUS). A SKU that does not exist reports nothing until it is created.
func WithWatchedSKUs(skus ...string) Option {
	return func(o *options) { o.watch = slices.Compact(slices.Sorted(slices.Values(skus))) }
}

// WithOverdueGrace makes stockflow.stock.overdue_locks count the locks held more than grace
// past their deadline: the ones the overdue-lock job would release (RECONCILE_OVERDUE_LOCKS_GRACE).
func WithOverdueGrace(grace time.Duration) Option {
	return func(o *options) { o.overdueGrace = grace }
}

// step names a lock resolution in the metrics.
type step int

const (
	stepSell step = iota
	stepRelease
	stepShip
	stepRefund
	steps
)

var stepNames = [steps]string{"sell", "release", "ship", "refund"}

// resolveOutcome is what a resolution did, in the metrics.
type resolveOutcome int

const (
	resolvedApplied resolveOutcome = iota
	resolvedNoop
	resolvedFailed
	resolvedDuplicate
	resolveOutcomes
)

var resolveOutcomeNames = [resolveOutcomes]string{"applied", "noop", "failed", "duplicate"}

// states are the figures stockflow.stock.sku.quantity reports of each watched SKU.
var states = [...]string{"on_hand", "available", "locked", "sold", "incoming"}

func figures(q stock.Quantities) [len(states)]int64 {
	return [...]int64{q.OnHand, q.Available(), q.Locked, q.Sold, q.Incoming}
}

// attrs are the precomputed attributes of one answer: the counter's and the histogram's
// (which has fewer labels). Recording with them allocates nothing (the lock path is
// benchmarked).
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newAttrs(counter, histogram []attribute.KeyValue) attrs {
	return attrs{add: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(counter...))},
		rec: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(histogram...))}}
}

// lockAttrs are the attributes of a lock answer: outcome and reason, the histogram outcome only.
func lockAttrs(outcome, reason string) attrs {
	o := attribute.String("outcome", outcome)
	return newAttrs([]attribute.KeyValue{o, attribute.String("reason", reason)}, []attribute.KeyValue{o})
}

// recorder holds the stock service's instruments (docs/observability.md), made once per
// Service.
type recorder struct {
	lockOutcomes    metric.Int64Counter
	lockDuration    metric.Float64Histogram
	resolveOutcomes metric.Int64Counter
	resolveDuration metric.Float64Histogram
	oversell        metric.Int64Counter

	locked, duplicate attrs
	rejected          map[string]attrs // by reason
	resolved          [steps][resolveOutcomes]attrs

	skuQuantity  metric.Int64ObservableGauge
	overdueLocks metric.Int64ObservableGauge
	watched      map[string][len(states)][]metric.ObserveOption // by SKU, by state
	reg          metric.Registration
	gauges       gaugeCache
}

// newRecorder makes the instruments on o.meters. A meter that refuses one (it never should:
// the names are valid) is reported to otel's error handler; the instrument it returns still
// works or does nothing.
func newRecorder(reads Reads, now func() time.Time, o options) *recorder {
	meter := o.meters.Meter(instrumentation)
	r := &recorder{rejected: map[string]attrs{}, watched: map[string][len(states)][]metric.ObserveOption{}}
	var errs [7]error
	r.lockOutcomes, errs[0] = meter.Int64Counter("stockflow.stock.lock.outcomes",
		metric.WithDescription("Order locks decided: locked, rejected (with the reason) or duplicate."), metric.WithUnit("{order}"))
	r.lockDuration, errs[1] = meter.Float64Histogram("stockflow.stock.lock.duration",
		metric.WithDescription("LockForOrder, call to answer (the wait for its batch included)."), metric.WithUnit("s"))
	r.resolveOutcomes, errs[2] = meter.Int64Counter("stockflow.stock.resolve.outcomes",
		metric.WithDescription("Lock resolutions (sell, release, ship, refund) by outcome."), metric.WithUnit("{order}"))
	r.resolveDuration, errs[3] = meter.Float64Histogram("stockflow.stock.resolve.duration",
		metric.WithDescription("A lock resolution, call to answer (the wait for its batch included)."), metric.WithUnit("s"))
	r.oversell, errs[4] = meter.Int64Counter("stockflow.stock.oversell",
		metric.WithDescription("SKUs seen with sold + locked > on_hand or available < 0; must stay 0."), metric.WithUnit("{sighting}"))
	r.skuQuantity, errs[5] = meter.Int64ObservableGauge("stockflow.stock.sku.quantity",
		metric.WithDescription("The figures of the watched SKUs (STOCK_WATCH_SKUS)."), metric.WithUnit("{unit}"))
	r.overdueLocks, errs[6] = meter.Int64ObservableGauge("stockflow.stock.overdue_locks",
		metric.WithDescription("Locks held past their deadline plus the overdue-lock job's grace."), metric.WithUnit("{lock}"))
	if err := errors.Join(errs[:]...); err != nil {
		otel.Handle(err)
	}

	r.locked, r.duplicate = lockAttrs("locked", ""), lockAttrs("duplicate", "")
	for _, reason := range []string{stock.RejectInsufficient, stock.RejectUnknownSKU, stock.RejectInvalidOrder} {
		r.rejected[reason] = lockAttrs("rejected", reason)
	}
	for s := range steps {
		st := attribute.String("step", stepNames[s])
		for out := range resolveOutcomes {
			r.resolved[s][out] = newAttrs([]attribute.KeyValue{st, attribute.String("outcome", resolveOutcomeNames[out])}, []attribute.KeyValue{st})
		}
	}
	for _, sku := range o.watch {
		var opts [len(states)][]metric.ObserveOption
		for i, st := range states {
			opts[i] = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("sku", sku), attribute.String("state", st)))}
		}
		r.watched[sku] = opts
	}
	// The series exists from the start, at 0: an alert on it needs no absent() guard. (serve
	// installs the SDK before it wires the service, so this 0 is not lost to the global
	// provider's no-op.)
	r.oversell.Add(context.Background(), 0)

	r.gauges = gaugeCache{read: func(ctx context.Context) (gaugeFigures, error) {
		var g gaugeFigures
		var err error
		if len(o.watch) > 0 {
			if g.skus, err = reads.SKUQuantities(ctx, o.watch); err != nil {
				return g, err
			}
		}
		g.overdue, err = reads.CountOverdueLocks(ctx, now().Add(-o.overdueGrace))
		return g, err
	}}
	var err error
	if r.reg, err = meter.RegisterCallback(r.observe, r.skuQuantity, r.overdueLocks); err != nil {
		otel.Handle(err)
	}
	return r
}

// close unregisters the gauges' callback: a closed Service reads nothing more.
func (r *recorder) close() {
	if r.reg == nil {
		return
	}
	if err := r.reg.Unregister(); err != nil {
		otel.Handle(err)
	}
}

// lockDecided counts a lock outcome once its transaction has committed, whether or not its
// caller is still waiting for the answer: the counter follows the ledger.
func (r *recorder) lockDecided(ctx context.Context, res stock.LockResult) {
	r.lockOutcomes.Add(ctx, 1, r.lockAttrs(res).add...)
}

// lockAnswered times the answer LockForOrder gave, begun at start.
func (r *recorder) lockAnswered(ctx context.Context, start time.Time, res stock.LockResult) {
	r.lockDuration.Record(ctx, time.Since(start).Seconds(), r.lockAttrs(res).rec...)
}

func (r *recorder) lockAttrs(res stock.LockResult) attrs {
	switch {
	case res.Duplicate:
		return r.duplicate
	case !res.Locked:
		if a, ok := r.rejected[res.Reason]; ok {
			return a
		}
		return lockAttrs("rejected", res.Reason)
	}
	return r.locked
}

// resolveDecided counts what a resolution of step did once its transaction has committed,
// whether or not its caller still waits for the answer.
func (r *recorder) resolveDecided(ctx context.Context, s step, res Resolution) {
	r.resolveOutcomes.Add(ctx, 1, r.resolveAttrs(s, res).add...)
}

// resolveAnswered times the answer a resolution of step gave, begun at start.
func (r *recorder) resolveAnswered(ctx context.Context, s step, start time.Time, res Resolution) {
	r.resolveDuration.Record(ctx, time.Since(start).Seconds(), r.resolveAttrs(s, res).rec...)
}

func (r *recorder) resolveAttrs(s step, res Resolution) attrs {
	out := resolvedNoop
	switch {
	case res.Duplicate:
		out = resolvedDuplicate
	case res.Failed != "":
		out = resolvedFailed
	case res.Applied:
		out = resolvedApplied
	}
	return r.resolved[s][out]
}

// oversold counts one sighting of each SKU of skus (each once).
func (r *recorder) oversold(ctx context.Context, skus ...string) {
	for _, sku := range slices.Compact(slices.Sorted(slices.Values(skus))) {
		r.oversell.Add(ctx, 1, metric.WithAttributes(attribute.String("sku", sku)))
	}
}

// differences counts the oversold SKUs among diffs (each SKU once).
func (r *recorder) differences(ctx context.Context, diffs []stock.Difference) {
	var skus []string
	for _, d := range diffs {
		if d.Check == CheckOversell {
			skus = append(skus, d.SKU)
		}
	}
	r.oversold(ctx, skus...)
}

// refused counts the SKUs of err when it is (or wraps) an OversellError.
func (r *recorder) refused(ctx context.Context, err error) {
	if err == nil {
		return // before o, which escapes to the heap: a transaction that succeeded allocates nothing here
	}
	var o *OversellError
	if errors.As(err, &o) {
		r.oversold(ctx, o.SKUs...)
	}
}

func (r *recorder) observe(ctx context.Context, o metric.Observer) error {
	g, err := r.gauges.get(ctx)
	if err != nil {
		return err
	}
	for sku, q := range g.skus {
		opts, ok := r.watched[sku]
		if !ok {
			continue
		}
		for i, v := range figures(q) {
			o.ObserveInt64(r.skuQuantity, v, opts[i]...)
		}
	}
	o.ObserveInt64(r.overdueLocks, int64(g.overdue))
	return nil
}

// gaugeFigures are what the gauges report, read in one go.
type gaugeFigures struct {
	skus    map[string]stock.Quantities
	overdue int
}

// gaugeCache reads the gauges' figures at most once per gaugeTTL (a failed read too: a
// database that is down is not asked at every scrape).
type gaugeCache struct {
	read func(context.Context) (gaugeFigures, error)

	mu   sync.Mutex
	at   time.Time
	last gaugeFigures
	err  error
}

func (c *gaugeCache) get(ctx context.Context) (gaugeFigures, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= gaugeTTL {
		ctx, cancel := context.WithTimeout(ctx, gaugeTimeout)
		defer cancel()
		c.last, c.err = c.read(ctx)
		c.at = time.Now()
	}
	return c.last, c.err
}

// guarded is the Store whose transactions count an OversellError in the metrics.
type guarded struct {
	Store
	rec *recorder
}

func (g guarded) InTx(ctx context.Context, fn func(Tx) error) error {
	err := g.Store.InTx(ctx, fn)
	g.rec.refused(ctx, err)
	return err
}

func (g guarded) InBatch(ctx context.Context, units []*outbox.Unit, fn func(tx Tx, fresh []int) error) error {
	err := g.Store.InBatch(ctx, units, fn)
	g.rec.refused(ctx, err)
	return err
}
