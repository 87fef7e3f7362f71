// Package app holds the timeout service's use cases, one file each: schedule an order's
// payment deadline (stock.locked), expire it when its scheduled message fires or the
// sweeper finds it overdue, and cancel it when stock resolved the order first (stock.sold,
// stock.released). Each runs one transaction — inbox claim, the deadline's change, outbox
// rows — so a crash at any line loses or duplicates nothing; concurrent schedules share one,
// and so do concurrent resolutions and fires (combined: every order of a flash sale comes
// here twice). Nothing is published inside a
// transaction: the schedule itself is an outbox row the relay publishes.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

// Store keeps deadlines.
type Store interface {
	// Within runs fn in one transaction: it claims in in the inbox first (when not nil; a
	// message processed before returns duplicate=true without calling fn), then calls fn and
	// writes the messages fn returns to the outbox, and commits. fn's error rolls everything
	// back and is returned.
	Within(ctx context.Context, in *inbox.Message, fn func(Tx) ([]events.Message, error)) (duplicate bool, err error)
	// Batch is Within for many units in one transaction (outbox.Batch): fn runs the fresh
	// ones (indexes into units) and sets their Msgs or Err.
	Batch(ctx context.Context, units []*outbox.Unit, fn func(tx Tx, fresh []int) error) error
	// Get returns the order's deadline, or an error wrapping deadline.ErrNotFound.
	Get(ctx context.Context, orderID string) (*deadline.Deadline, error)
}

// Tx is the Store inside one transaction of Within.
type Tx interface {
	// Insert stores each deadline, with its traceparent, unless its order already has one,
	// and reports which it stored (the first of an order given twice). A concurrent insert of
	// the same order is waited for, so exactly one of them inserts.
	Insert(ctx context.Context, ds []Traced) (inserted []bool, err error)
	// Lock returns the deadlines of the orders that have one, by order id, locked FOR UPDATE
	// (in order id order, so two transactions locking orders in common never deadlock).
	Lock(ctx context.Context, orderIDs []string) (map[string]*deadline.Deadline, error)
	// LockDue returns up to limit scheduled deadlines due at now (deadline <= now), earliest
	// first, locked FOR UPDATE SKIP LOCKED: rows another transaction holds are skipped. Each
	// comes with the trace context Insert stored with it.
	LockDue(ctx context.Context, now time.Time, limit int) ([]Traced, error)
	// Save stores the state and resolution of each of ds, in one statement.
	Save(ctx context.Context, ds []*deadline.Deadline) error
}

// Traced is a deadline with the W3C traceparent of the trace it was scheduled in ("" when
// unknown): the sweeper's expiry continues that trace, as a fired schedule does.
type Traced struct {
	*deadline.Deadline
	Traceparent string
}

// CancelSchedule removes an order's pending scheduled message (natsx.CancelSchedule in
// production). It is best effort: a fire that still arrives finds the deadline resolved.
type CancelSchedule func(ctx context.Context, orderID string) error

// Service runs the timeout use cases.
type Service struct {
	store      Store
	cancel     CancelSchedule
	log        *slog.Logger
	sweepBatch int
	now        func() time.Time
	combining  combine.Options
	schedules  *combine.Batcher[scheduleCall, scheduled]
	resolves   *combine.Batcher[resolveCall, resolved]
	fires      *combine.Batcher[fireCall, fired]
}

// Option changes a Service built by New; tests use them to fix the clock.
type Option func(*Service)

// WithClock makes the service read the time from now.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithCombining shapes the batches of concurrent schedules, resolutions and fires
// (TIMEOUT_COMBINE_MAX_BATCH); MaxBatch 1 gives every message its own transaction.
func WithCombining(o combine.Options) Option { return func(s *Service) { s.combining = o } }

// New returns a Service on store; cancel removes pending schedules (nil: never), and the
// sweeper expires up to sweepBatch deadlines per transaction.
func New(store Store, cancel CancelSchedule, log *slog.Logger, sweepBatch int, opts ...Option) *Service {
	if cancel == nil {
		cancel = func(context.Context, string) error { return nil }
	}
	if sweepBatch <= 0 {
		sweepBatch = 500
	}
	s := &Service{
		store:      store,
		cancel:     cancel,
		log:        log,
		sweepBatch: sweepBatch,
		// PostgreSQL keeps microseconds: truncating makes what we return equal what we read back.
		now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
	}
	for _, o := range opts {
		o(s)
	}
	// Batches run on a context of their own: a caller giving up must not abort the others.
	s.schedules = combine.New(context.Background(), s.combining.Named("schedule"), combine.FallbackToOne(s.scheduleAll))
	s.resolves = combine.New(context.Background(), s.combining.Named("resolve_deadline"), combine.FallbackToOne(s.resolveAll))
	s.fires = combine.New(context.Background(), s.combining.Named("fire"), combine.FallbackToOne(s.fireAll))
	return s
}

// Close waits for the batches in flight; later calls fail.
func (s *Service) Close() {
	s.schedules.Close()
	s.resolves.Close()
	s.fires.Close()
}

// Get returns the order's deadline, or an error wrapping deadline.ErrNotFound.
func (s *Service) Get(ctx context.Context, orderID string) (*deadline.Deadline, error) {
	d, err := s.store.Get(ctx, orderID)
	if err != nil {
		return nil, fmt.Errorf("get deadline %s: %w", orderID, err)
	}
	return d, nil
}

// expiredEvent is timeout.expired for d. Its id is deterministic, "timeout-expired:<order>",
// so an expiry written twice (a fire and a sweep racing across a failover, say) is one row
// in the outbox and one message in JetStream.
func (s *Service) expiredEvent(d *deadline.Deadline) (events.Message, error) {
	return events.EncodeWithID("timeout-expired:"+d.OrderID(), events.TimeoutExpired{OrderID: d.OrderID(), Deadline: d.At()}, s.now())
}
