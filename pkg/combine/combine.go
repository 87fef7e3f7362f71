// Package combine gathers concurrent calls into batches that run together — group commit. A
// thousand buyers waiting on one database row each pay for one transaction and one WAL flush;
// gathered, they share both. Callers still get one answer each.
//
// Every batch is measured: stockflow.combine.batch.size (requests per batch) and
// stockflow.combine.flush.duration (seconds in run), both labelled with the Batcher's name.
package combine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentation = "github.com/stockflow/stockflow/pkg/combine"

// Options shape the batches. Zero values take the defaults.
type Options struct {
	// Name labels the batcher's metrics (label batcher: "lock", "resolve", …). Default
	// "unnamed".
	Name string
	// MaxBatch caps the calls run together (default 128).
	MaxBatch int
	// MaxWait is how long a flusher holding fewer than MaxBatch calls waits for more (default
	// 0: it takes what is queued and goes, so a lone caller pays no extra latency; under load
	// batches form on their own while the previous ones commit).
	MaxWait time.Duration
	// Flushers is how many batches may run at once (default 1). On a small machine one is
	// fastest: while it commits, the next batch queues up; more help when the database has
	// cores to spare and the batches touch different rows.
	Flushers int
	// Timeout bounds one batch's run (default DefaultTimeout): a batch stuck on a connection
	// that will never answer (a peer gone without a reset) fails, as a transaction cut off
	// does, instead of holding every later call behind it.
	Timeout time.Duration
}

// Named returns o with Name set to name: one Options can shape several batchers, each
// measured under its own name.
func (o Options) Named(name string) Options {
	o.Name = name
	return o
}

// Defaults for Options.
const (
	DefaultMaxBatch = 128
	DefaultFlushers = 1
	DefaultTimeout  = 15 * time.Second
)

// Result is one call's answer.
type Result[T any] struct {
	Value T
	Err   error
}

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("combine: closed")

// Batcher runs calls of type R in batches through run, which must return one Result per
// request, in order.
type Batcher[R, T any] struct {
	run     func(ctx context.Context, reqs []R) []Result[T]
	opts    Options
	sizes   metric.Int64Histogram
	flushes metric.Float64Histogram
	attrs   metric.MeasurementOption
	queue   chan call[R, T]
	done    chan struct{}
	once    sync.Once
	workers sync.WaitGroup
}

type call[R, T any] struct {
	req   R
	reply chan Result[T]
}

// New starts a Batcher. run gets ctx bounded by Options.Timeout (not a caller's context: one
// caller giving up must not abort the others' batch).
func New[R, T any](ctx context.Context, opts Options, run func(ctx context.Context, reqs []R) []Result[T]) *Batcher[R, T] {
	if opts.MaxBatch < 1 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Flushers < 1 {
		opts.Flushers = DefaultFlushers
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Name == "" {
		opts.Name = "unnamed"
	}
	b := &Batcher[R, T]{run: run, opts: opts, queue: make(chan call[R, T]), done: make(chan struct{}),
		attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("batcher", opts.Name)))}
	b.sizes, b.flushes = instruments()
	for range opts.Flushers {
		b.workers.Go(func() { b.flush(ctx) })
	}
	return b
}

// Do runs req in the next batch and returns its result. When ctx ends first Do returns
// ctx.Err(), but a request already handed to a batch may still take effect: callers retry
// with the same idempotency key.
func (b *Batcher[R, T]) Do(ctx context.Context, req R) (T, error) {
	c := call[R, T]{req: req, reply: make(chan Result[T], 1)}
	var zero T
	select {
	case b.queue <- c:
	case <-b.done:
		return zero, ErrClosed
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case r := <-c.reply:
		return r.Value, r.Err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Close stops taking calls and waits for the batches in flight.
func (b *Batcher[R, T]) Close() {
	b.once.Do(func() { close(b.done) })
	b.workers.Wait()
}

func (b *Batcher[R, T]) flush(ctx context.Context) {
	calls := make([]call[R, T], 0, b.opts.MaxBatch)
	reqs := make([]R, 0, b.opts.MaxBatch)
	for {
		calls, reqs = calls[:0], reqs[:0]
		select {
		case c := <-b.queue:
			calls = append(calls, c)
		case <-b.done:
			return
		}
		calls = b.gather(calls)
		for _, c := range calls {
			reqs = append(reqs, c.req)
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
		results := b.run(rctx, reqs)
		cancel()
		b.flushes.Record(ctx, time.Since(start).Seconds(), b.attrs)
		b.sizes.Record(ctx, int64(len(reqs)), b.attrs)
		for i, c := range calls {
			if i < len(results) {
				c.reply <- results[i]
			} else {
				c.reply <- Result[T]{Err: errors.New("combine: batch returned too few results")}
			}
		}
	}
}

// gather adds the calls already queued, then waits up to MaxWait for more, up to MaxBatch.
func (b *Batcher[R, T]) gather(calls []call[R, T]) []call[R, T] {
	for len(calls) < b.opts.MaxBatch {
		select {
		case c := <-b.queue:
			calls = append(calls, c)
			continue
		default:
		}
		break
	}
	if b.opts.MaxWait <= 0 || len(calls) >= b.opts.MaxBatch {
		return calls
	}
	timer := time.NewTimer(b.opts.MaxWait)
	defer timer.Stop()
	for len(calls) < b.opts.MaxBatch {
		select {
		case c := <-b.queue:
			calls = append(calls, c)
		case <-timer.C:
			return calls
		}
	}
	return calls
}

// Fallback returns a batch function that runs batch and, when it fails as a whole (a
// deadlock victim, a lost connection, a constraint one request trips), runs each request
// alone in arrival order, so one bad request cannot fail the others.
func Fallback[R, T any](batch func(ctx context.Context, reqs []R) ([]Result[T], error), alone func(ctx context.Context, req R) Result[T]) func(context.Context, []R) []Result[T] {
	return func(ctx context.Context, reqs []R) []Result[T] {
		out, err := batch(ctx, reqs)
		if err == nil {
			return out
		}
		out = make([]Result[T], len(reqs))
		if len(reqs) == 1 {
			out[0].Err = err
			return out
		}
		for i, r := range reqs {
			out[i] = alone(ctx, r)
		}
		return out
	}
}

// FallbackToOne is Fallback for a batch function that also runs a request alone, as a batch
// of one.
func FallbackToOne[R, T any](batch func(ctx context.Context, reqs []R) ([]Result[T], error)) func(context.Context, []R) []Result[T] {
	return Fallback(batch, func(ctx context.Context, r R) Result[T] {
		out, err := batch(ctx, []R{r})
		if err != nil {
			return Result[T]{Err: err}
		}
		return out[0]
	})
}

// instruments returns the batch size and flush duration histograms. An instrument that cannot
// be created is reported to otel's error handler and works as a no-op: metrics never stop a
// batcher.
func instruments() (metric.Int64Histogram, metric.Float64Histogram) {
	meter := otel.Meter(instrumentation)
	sizes, err := meter.Int64Histogram("stockflow.combine.batch.size",
		metric.WithDescription("Requests run together in one combined batch."), metric.WithUnit("{request}"),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
	if err != nil {
		otel.Handle(fmt.Errorf("combine metrics: %w", err))
	}
	flushes, err := meter.Float64Histogram("stockflow.combine.flush.duration",
		metric.WithDescription("Time one combined batch took to run (its transaction)."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		otel.Handle(fmt.Errorf("combine metrics: %w", err))
	}
	return sizes, flushes
}
