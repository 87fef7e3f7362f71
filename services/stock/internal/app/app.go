// Package app holds the stock service's use cases, one file each. A use case runs in one
// transaction: the inbox row of the message it consumes (if any), the movement and its ledger
// row, and the outbox rows of the events it emits — so a crash at any line loses or
// duplicates nothing.
package app

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Operator is the ledger's operator for movements driven by events.
const Operator = "stock-consumer"

// Service runs the stock use cases. Lock requests, and the requests that resolve locks (sell,
// release, ship, refund), are combined: concurrent ones run together in one transaction
// (DESIGN §7), each with its own answer, its own ledger rows and its own events.
type Service struct {
	store    Store
	now      func() time.Time
	locks    *combine.Batcher[lockCall, stock.LockResult]
	resolves *combine.Batcher[resolveCall, Resolution]
	rec      *recorder
}

// New returns a Service on store that combines requests with the default options.
func New(store Store, with ...Option) *Service {
	return NewCombining(store, combine.Options{}, with...)
}

// NewCombining returns a Service on store that combines requests as opts says; MaxBatch 1
// runs every request in its own transaction. Its instruments (docs/observability.md) are made
// here, once, on the global MeterProvider unless an Option says otherwise.
func NewCombining(store Store, opts combine.Options, with ...Option) *Service {
	o := options{meters: otel.GetMeterProvider(), now: time.Now}
	for _, opt := range with {
		opt(&o)
	}
	s := &Service{now: o.now}
	s.rec = newRecorder(store, s.now, o)
	s.store = guarded{Store: store, rec: s.rec}
	// Batches run on a context of their own: a caller giving up must not abort the others.
	ctx := context.Background()
	s.locks = combine.New(ctx, opts.Named("lock"), combined(func(c lockCall) string { return c.req.OrderID }, s.lockOrders))
	s.resolves = combine.New(ctx, opts.Named("resolve"), combined(func(c resolveCall) string { return c.orderID }, s.resolveOrders))
	return s
}

// WithClock makes the Service read the time from now: whether a timeout is due, the overdue
// gauge, the time its events carry. The service passes service.Base.Clock; tests move it.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// Now is the time on the Service's clock (WithClock): jobs that pick locks by their deadline
// read it, so they agree with the use cases about what is due.
func (s *Service) Now() time.Time { return s.now() }

// Close waits for the batches in flight and stops the gauges; later calls fail.
func (s *Service) Close() {
	s.locks.Close()
	s.resolves.Close()
	s.rec.close()
}

// emit sets what u emits: evs, encoded now, each carrying the trace of ctx (its caller's).
func (s *Service) emit(ctx context.Context, u *outbox.Unit, evs ...events.Event) error {
	u.Msgs = nil
	for _, ev := range evs {
		m, err := events.Encode(ev, s.now())
		if err != nil {
			return err
		}
		m.Headers = map[string]string{}
		telemetry.InjectMap(ctx, m.Headers)
		u.Msgs = append(u.Msgs, m)
	}
	return nil
}

// combined turns run, which takes a batch of calls in one transaction, into a combine batch
// function. Calls with the same key go to separate rounds, one after the other (two payments
// of one order are decided in turn); a round that fails as a whole is run one call at a time
// (combine.Fallback).
func combined[C, T any](key func(C) string, run func(ctx context.Context, calls []C) ([]combine.Result[T], error)) func(context.Context, []C) []combine.Result[T] {
	round := combine.FallbackToOne(run)
	return func(ctx context.Context, calls []C) []combine.Result[T] {
		out := make([]combine.Result[T], len(calls))
		var rounds [][]int
		seen := map[string]int{}
		for i, c := range calls {
			k := seen[key(c)]
			seen[key(c)]++
			if k == len(rounds) {
				rounds = append(rounds, nil)
			}
			rounds[k] = append(rounds[k], i)
		}
		for _, r := range rounds {
			batch := make([]C, len(r))
			for j, i := range r {
				batch[j] = calls[i]
			}
			for j, res := range round(ctx, batch) {
				out[r[j]] = res
			}
		}
		return out
	}
}

// Resolution is what a sell, release, ship or refund did to an order's locks.
type Resolution struct {
	OrderID   string
	Applied   bool   // stock moved now
	State     string // the locks' state afterwards
	Relocked  bool   // a late payment took released stock again
	NoOp      string // why nothing moved, when Applied is false
	Failed    string // a sell that could not be made (stock.sell_failed was emitted)
	Duplicate bool   // the message had been processed before: nothing was done
	Entries   []LedgerSummary
}

// LedgerSummary names a ledger row a use case wrote.
type LedgerSummary struct {
	ID   int64
	SKU  string
	Type string
	Qty  int64
}
