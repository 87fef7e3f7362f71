package outbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentation = "github.com/stockflow/stockflow/pkg/outbox"

// observeTimeout bounds the backlog query of one collection (a scrape of /metrics).
const observeTimeout = 2 * time.Second

// observeBacklog registers the gauges stockflow.outbox.backlog (rows not yet published) and
// stockflow.outbox.oldest_age (seconds since the oldest of them was written, 0 when none),
// observed by one query per collection; Run keeps them registered while it runs. The query
// reads the pending rows only (the view outbox_unpublished: the index outbox_pending from the
// relay's cursor on, and outbox_retry), never the published rows kept for Retention. Every
// replica's relay observes the same table: take the max.
func (r *Relay) observeBacklog() (unregister func(), err error) {
	meter := otel.Meter(instrumentation)
	backlog, err := meter.Int64ObservableGauge("stockflow.outbox.backlog",
		metric.WithDescription("Outbox rows not yet published."), metric.WithUnit("{row}"))
	if err != nil {
		return nil, fmt.Errorf("outbox metrics: %w", err)
	}
	oldest, err := meter.Float64ObservableGauge("stockflow.outbox.oldest_age",
		metric.WithDescription("Age of the oldest unpublished outbox row (0 when none)."), metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("outbox metrics: %w", err)
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, observeTimeout)
		defer cancel()
		var n int64
		var age float64
		if err := r.pool.QueryRow(ctx, `
			SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
			FROM outbox_unpublished`).Scan(&n, &age); err != nil {
			return fmt.Errorf("outbox metrics: backlog: %w", err)
		}
		o.ObserveInt64(backlog, n)
		o.ObserveFloat64(oldest, max(age, 0))
		return nil
	}, backlog, oldest)
	if err != nil {
		return nil, fmt.Errorf("outbox metrics: %w", err)
	}
	return func() {
		if err := reg.Unregister(); err != nil {
			otel.Handle(fmt.Errorf("outbox metrics: unregister: %w", err))
		}
	}, nil
}

// duplicates is stockflow.inbox.duplicates, counted by Batch (and so InTx) for each message
// the inbox found processed before.
var duplicates = sync.OnceValue(func() metric.Int64Counter {
	c, err := otel.Meter(instrumentation).Int64Counter("stockflow.inbox.duplicates",
		metric.WithDescription("Messages the inbox found already processed (a redelivery or a replay), not applied again."),
		metric.WithUnit("{message}"))
	if err != nil {
		otel.Handle(fmt.Errorf("outbox metrics: %w", err)) // c still works, as a no-op
	}
	return c
})

// countDuplicates counts the units of a committed batch whose message was a duplicate, each
// once: a batch that failed is retried, and its duplicates are counted by the run that ends it.
func countDuplicates(ctx context.Context, units []*Unit) {
	for _, u := range units {
		if u.Dup && u.In != nil {
			duplicates().Add(ctx, 1, metric.WithAttributes(attribute.String("consumer", u.In.Consumer)))
		}
	}
}
