package app

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// instrumentation is the meter name of the order service's instruments.
const instrumentation = "github.com/stockflow/stockflow/services/order"

// gaugeTTL is how long the refund_pending age read from the database is reused: a scrape
// reads it at most once per gaugeTTL.
const gaugeTTL = 5 * time.Second

// WithMeterProvider makes the service's instruments on mp instead of the global
// MeterProvider (tests read them through a manual reader).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(s *Service) { s.meters = mp } }

// recorder holds the order service's instruments (docs/observability.md), made once per
// Service.
type recorder struct {
	transitions metric.Int64Counter
	entered     map[order.Status][]metric.AddOption
	oldest      metric.Float64ObservableGauge
	gate        metric.Int64Counter
	verdicts    map[gate.Verdict][]metric.AddOption
	cached      []metric.AddOption // verdict sold_out_cached

	mu   sync.Mutex // guards the cached age
	at   time.Time  // when wait and err were read
	wait time.Time  // when the order longest in refund_pending entered it; zero: none waits
	err  error
}

// newRecorder makes the instruments on mp; the refund_pending gauge asks repo, at most once
// per gaugeTTL, and measures the age on now. A refused instrument (it never should be: the
// names are valid) is reported to otel's error handler.
func newRecorder(mp metric.MeterProvider, repo Repository, now func() time.Time) *recorder {
	meter := mp.Meter(instrumentation)
	r := &recorder{entered: map[order.Status][]metric.AddOption{}}
	var err error
	if r.transitions, err = meter.Int64Counter("stockflow.order.transitions",
		metric.WithDescription("Orders entering a status (the funnel), counted when the change committed."),
		metric.WithUnit("{order}")); err != nil {
		otel.Handle(err)
	}
	for _, st := range order.Statuses() {
		r.entered[st] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("status", st.String())))}
	}
	if r.gate, err = meter.Int64Counter("stockflow.order.gate",
		metric.WithDescription("Order attempts the flash-sale gate answered, by verdict (admitted, sold_out, open: no SKU armed, bypassed: Redis not answering, sold_out_cached: a sold_out remembered from moments ago)."),
		metric.WithUnit("{order}")); err != nil {
		otel.Handle(err)
	}
	r.verdicts = map[gate.Verdict][]metric.AddOption{}
	for _, v := range []gate.Verdict{gate.Open, gate.Admitted, gate.SoldOut, gate.Bypassed} {
		r.verdicts[v] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("verdict", v.String())))}
	}
	r.cached = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("verdict", "sold_out_cached")))}
	if r.oldest, err = meter.Float64ObservableGauge("stockflow.order.refund_pending.oldest_age",
		metric.WithDescription("How long the order longest in refund_pending has waited there (0 when none)."),
		metric.WithUnit("s")); err != nil {
		otel.Handle(err)
	}
	_, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		since, err := r.oldestRefund(ctx, repo)
		if err != nil {
			return err
		}
		age := 0.0
		if !since.IsZero() {
			age = max(now().Sub(since).Seconds(), 0)
		}
		o.ObserveFloat64(r.oldest, age)
		return nil
	}, r.oldest)
	if err != nil {
		otel.Handle(err)
	}
	return r
}

// oldestRefund is repo.OldestRefundPending, read at most once per gaugeTTL (a failure too).
func (r *recorder) oldestRefund(ctx context.Context, repo Repository) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at.IsZero() || time.Since(r.at) >= gaugeTTL {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		r.wait, r.err = repo.OldestRefundPending(ctx)
		r.at = time.Now()
	}
	return r.wait, r.err
}

// enter counts an order entering status st.
func (r *recorder) enter(ctx context.Context, st order.Status) {
	r.transitions.Add(ctx, 1, r.entered[st]...)
}

// gated counts one gate verdict.
func (r *recorder) gated(ctx context.Context, v gate.Verdict) {
	r.gate.Add(ctx, 1, r.verdicts[v]...)
}

// soldOutCached counts one attempt answered sold_out from memory, without asking the gate.
func (r *recorder) soldOutCached(ctx context.Context) {
	r.gate.Add(ctx, 1, r.cached...)
}

// update is repo.UpdateWith that counts, once the change committed, the status the order
// entered (none when fn left the status as it was). fn may run more than once — a combined
// batch that failed as a whole runs each update again alone — so what counts is the status
// seen around the last run, the one committed.
func (s *Service) update(ctx context.Context, id string, in *inbox.Message, fn func(*order.Order) ([]events.Message, error)) (duplicate bool, err error) {
	var from, to order.Status
	duplicate, err = s.repo.UpdateWith(ctx, id, in, func(o *order.Order) ([]events.Message, error) {
		from = o.Status()
		msgs, err := fn(o)
		to = o.Status()
		return msgs, err
	})
	if err == nil && !duplicate && to != from {
		s.rec.enter(ctx, to)
	}
	return duplicate, err
}
