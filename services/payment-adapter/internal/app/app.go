// Package app holds payment-adapter's use cases, one file each. Every use case runs in one
// transaction through the Store: the payment's change, the outbox rows of the events it emits
// and — for a consumed message — the inbox row, so a crash at any line loses or duplicates
// nothing.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// Selector picks the payment an update applies to: by id, or by its provider transaction
// (Provider and ProviderTxnID).
type Selector struct {
	PaymentID     string
	Provider      string
	ProviderTxnID string
}

// Store keeps order totals and payments. Each method runs in one transaction.
type Store interface {
	// RememberOrders, in one transaction, claims each ins[i] in the inbox and stores os[i],
	// unless a total for its order is already stored (order totals never change).
	// duplicate[i] is true when ins[i] was processed before (or is given twice).
	RememberOrders(ctx context.Context, ins []inbox.Message, os []payment.OrderTotal) (duplicate []bool, err error)
	// RecordPayment records a notification of the provider transaction (provider, txnID). When
	// none is stored it stores the payment decide(o, nil) builds for the stored total o of
	// orderID, and the messages decide returns in the outbox: created=true. When one is stored
	// it calls decide(o, existing) with it locked (FOR UPDATE) and o its order's total; decide
	// may change it (changed=true: it is saved and the messages written) or not. An unknown
	// order returns an error wrapping payment.ErrOrderUnknown, nothing stored.
	RecordPayment(ctx context.Context, provider, txnID, orderID string,
		decide func(o payment.OrderTotal, existing *payment.Payment) (p *payment.Payment, changed bool, msgs []events.Message, err error),
	) (p *payment.Payment, created bool, err error)
	// UpdatePayments claims in (when not nil) — a processed message returns duplicate=true
	// and touches nothing — then locks the payment sel picks (FOR UPDATE), calls fn on it,
	// stores what fn changed and writes the messages fn returns to the outbox. fn's error
	// rolls everything back. A selector that picks nothing returns an error wrapping
	// payment.ErrNotFound, nothing stored (not even the claim).
	UpdatePayments(ctx context.Context, in *inbox.Message, sel Selector,
		fn func(*payment.Payment) (changed bool, msgs []events.Message, err error)) (duplicate bool, err error)
	// UpdateOrderPayments is UpdatePayments for every payment of an order, oldest first (none
	// is no error); then, in the same transaction, it writes the messages done returns, given
	// the payments as fn left them.
	UpdateOrderPayments(ctx context.Context, in *inbox.Message, orderID string,
		fn func(*payment.Payment) (changed bool, msgs []events.Message, err error),
		done func([]*payment.Payment) ([]events.Message, error)) (duplicate bool, err error)
	// Get returns the payment, or an error wrapping payment.ErrNotFound.
	Get(ctx context.Context, id string) (*payment.Payment, error)
	// ListByOrder returns the payments of an order, oldest first (none: empty, no error).
	ListByOrder(ctx context.Context, orderID string) ([]*payment.Payment, error)
	// ListSucceeded returns up to limit payments still succeeded (not refunded) that were
	// recorded in [from, to), oldest first.
	ListSucceeded(ctx context.Context, from, to time.Time, limit int) ([]*payment.Payment, error)
	// ListOpenRefunds returns up to limit payments whose refund is requested or pending and
	// was requested before requestedBefore, oldest request first.
	ListOpenRefunds(ctx context.Context, requestedBefore time.Time, limit int) ([]*payment.Payment, error)
	// ListFailedRefunds returns up to limit payments whose refund failed, oldest request first.
	ListFailedRefunds(ctx context.Context, limit int) ([]*payment.Payment, error)
	// ListUnpaidOrders returns up to limit remembered orders, oldest first, remembered before
	// createdBefore, with no succeeded or refunded payment, whose payment deadline is after
	// deadlineAfter — or, for an order remembered without a deadline, remembered after
	// createdAfter.
	ListUnpaidOrders(ctx context.Context, createdBefore, deadlineAfter, createdAfter time.Time, limit int) ([]payment.OrderTotal, error)
}

// Service runs payment-adapter's use cases.
type Service struct {
	store     Store
	providers *payment.Registry
	log       *slog.Logger
	now       func() time.Time
	newID     func() string
	meters    metric.MeterProvider
	rec       *recorder
	combining combine.Options
	remembers *combine.Batcher[rememberCall, bool]
}

// Option changes a Service built by New; tests use them to fix the clock or read the metrics.
type Option func(*Service)

// WithClock makes the service read the time from now (every use case does: refund times and
// retry times included).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithCombining shapes the batches of concurrent order.created (PAYMENT_COMBINE_MAX_BATCH);
// MaxBatch 1 gives each its own transaction.
func WithCombining(o combine.Options) Option { return func(s *Service) { s.combining = o } }

// New returns a Service on store with the given providers. Its instruments
// (docs/observability.md) are made here, once, on the global MeterProvider unless an Option
// says otherwise.
func New(store Store, providers *payment.Registry, log *slog.Logger, opts ...Option) *Service {
	s := &Service{
		store:     store,
		providers: providers,
		log:       log,
		// PostgreSQL keeps microseconds: truncating makes what we return equal what we read back.
		now:    func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		newID:  func() string { return uuid.Must(uuid.NewV7()).String() },
		meters: otel.GetMeterProvider(),
	}
	for _, o := range opts {
		o(s)
	}
	s.rec = newRecorder(s.meters, providers.Names())
	// Batches run on a context of their own: a caller giving up must not abort the others.
	s.remembers = combine.New(context.Background(), s.combining.Named("remember_order"), combine.FallbackToOne(s.rememberAll))
	return s
}

// Close waits for the order totals being stored; later ones fail.
func (s *Service) Close() { s.remembers.Close() }

// Get returns the payment with id, or an error wrapping payment.ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (*payment.Payment, error) {
	p, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get payment %s: %w", id, err)
	}
	return p, nil
}

// ListByOrder returns the payments of orderID, oldest first.
func (s *Service) ListByOrder(ctx context.Context, orderID string) ([]*payment.Payment, error) {
	ps, err := s.store.ListByOrder(ctx, orderID)
	if err != nil {
		return nil, fmt.Errorf("list payments of order %s: %w", orderID, err)
	}
	return ps, nil
}
