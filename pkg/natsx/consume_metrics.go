package natsx

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// lagRefresh is how often a collection of stockflow.messaging.consumer.lag may ask the
// server for the consumer's info: scrapes in between see the cached figure, so any number of
// scrapers (and replicas) cost the server one request per consumer per interval.
var lagRefresh = 5 * time.Second

// lagTimeout bounds one consumer info request made for a collection.
const lagTimeout = 2 * time.Second

// consumerMetrics are a durable consumer's instruments (docs/observability.md):
// stockflow.messaging.terminated (labels consumer, reason), stockflow.messaging.redeliveries
// (label consumer) and the gauge stockflow.messaging.consumer.lag (labels stream, consumer:
// the consumer's num_pending), registered until close.
type consumerMetrics struct {
	terminated   metric.Int64Counter
	redeliveries metric.Int64Counter
	consumer     metric.MeasurementOption
	reg          metric.Registration

	mu      sync.Mutex
	cons    jetstream.Consumer
	fetched time.Time
	pending int64
	known   bool // pending comes from a successful fetch
}

func newConsumerMetrics(spec ConsumerSpec, cons jetstream.Consumer) (*consumerMetrics, error) {
	meter := otel.Meter(instrumentation)
	m := &consumerMetrics{cons: cons, consumer: metric.WithAttributeSet(attribute.NewSet(attribute.String("consumer", spec.Durable)))}
	var err error
	if m.terminated, err = meter.Int64Counter("stockflow.messaging.terminated",
		metric.WithDescription("Messages dead-lettered and terminated: poison, or out of deliveries."),
		metric.WithUnit("{message}")); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if m.redeliveries, err = meter.Int64Counter("stockflow.messaging.redeliveries",
		metric.WithDescription("Deliveries of a message after its first (a retry, an expired ack wait)."),
		metric.WithUnit("{delivery}")); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	lag, err := meter.Int64ObservableGauge("stockflow.messaging.consumer.lag",
		metric.WithDescription("Messages of the stream not yet delivered to the durable consumer (num_pending)."),
		metric.WithUnit("{message}"))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	lagAttrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("stream", spec.Stream), attribute.String("consumer", spec.Durable)))
	if m.reg, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		pending, ok, err := m.lag(ctx)
		if ok {
			o.ObserveInt64(lag, pending, lagAttrs)
		}
		return err
	}, lag); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return m, nil
}

// lag returns the consumer's num_pending, asking the server at most once per lagRefresh (a
// failure too: a server that is down is not asked on every scrape). ok is false while no fetch
// has succeeded since the last failure: no figure is better than a stale one then.
func (m *consumerMetrics) lag(ctx context.Context) (pending int64, ok bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.fetched) < lagRefresh {
		return m.pending, m.known, nil
	}
	m.fetched = time.Now()
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	info, err := m.cons.Info(ctx)
	if err != nil {
		m.known = false
		return 0, false, fmt.Errorf("consumer lag: %w", err)
	}
	m.pending, m.known = int64(info.NumPending), true
	return m.pending, true, nil
}

// delivered counts a delivery after the first.
func (m *consumerMetrics) delivered(ctx context.Context, numDelivered uint64) {
	if numDelivered > 1 {
		m.redeliveries.Add(ctx, 1, m.consumer)
	}
}

// deadLettered counts a message dead-lettered for reason (the HeaderDLReason value): label
// reason is poison, or max_deliveries for one out of deliveries ("exhausted" in the header).
func (m *consumerMetrics) deadLettered(ctx context.Context, consumer, reason string) {
	if reason == "exhausted" {
		reason = "max_deliveries"
	}
	m.terminated.Add(ctx, 1, metric.WithAttributes(attribute.String("consumer", consumer), attribute.String("reason", reason)))
}

// close stops observing the lag: a stopped consumer is no longer this process's to report.
func (m *consumerMetrics) close() {
	if err := m.reg.Unregister(); err != nil {
		otel.Handle(fmt.Errorf("consumer metrics: unregister: %w", err))
	}
}
