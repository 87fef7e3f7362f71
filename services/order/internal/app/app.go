// Package app holds the order service's use cases, one file each. Every use case runs in one
// transaction through the Repository: the order's change, its history, the outbox rows of the
// events it emits and — for a consumed message — the inbox row, so a crash at any line loses
// or duplicates nothing.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/order/internal/catalog"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// ErrIdempotencyConflict is returned by PlaceOrder when the idempotency key was already used
// for a different request.
var ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")

// Repository stores orders. Implementations run each call in one transaction.
type Repository interface {
	// Create stores a new order and msgs, keyed by key. When key is taken by an order placed
	// with the same requestHash it stores nothing and returns that order with created=false;
	// with another hash it returns ErrIdempotencyConflict.
	Create(ctx context.Context, o *order.Order, key string, requestHash []byte, msgs []events.Message) (stored *order.Order, created bool, err error)
	// Get returns the order, or order.ErrNotFound.
	Get(ctx context.Context, id string) (*order.Order, error)
	// ListByBuyer returns up to limit of buyerID's orders, newest first, starting after the
	// order before (empty: from the newest). An unknown before yields no orders.
	ListByBuyer(ctx context.Context, buyerID, before string, limit int) ([]*order.Order, error)
	// Update locks the order (SELECT … FOR UPDATE), runs fn on it and, when fn returns nil,
	// stores what fn changed and commits. fn's error rolls everything back and is returned.
	// A missing order returns order.ErrNotFound without calling fn.
	Update(ctx context.Context, id string, fn func(*order.Order) error) error
	// UpdateWith is Update that also claims in (when not nil) in the inbox first — a message
	// already processed returns duplicate=true without calling fn — and writes the messages
	// fn returns to the outbox, all in the same transaction.
	UpdateWith(ctx context.Context, id string, in *inbox.Message, fn func(*order.Order) ([]events.Message, error)) (duplicate bool, err error)
	// ListStuck returns up to limit orders still pending or awaiting_payment whose payment
	// deadline is before cutoff, oldest deadline first.
	ListStuck(ctx context.Context, cutoff time.Time, limit int) ([]*order.Order, error)
	// OldestRefundPending returns when the order that has been in refund_pending longest
	// entered it; the zero time when no order is in refund_pending. It must be cheap: the
	// refund_pending gauge asks every few seconds.
	OldestRefundPending(ctx context.Context) (time.Time, error)
}

// PriceList stores the sales terms of SKUs (the price catalogue).
type PriceList interface {
	// PutPrice stores p, replacing the SKU's earlier terms.
	PutPrice(ctx context.Context, p catalog.Price) error
	// Prices returns the terms of those of skus that have a price, keyed by SKU.
	Prices(ctx context.Context, skus []string) (map[string]catalog.Price, error)
}

// Policy is the service's sales policy, from its configuration.
type Policy struct {
	// PaymentWindow is an order's payment window when none of its SKUs has one of its own.
	PaymentWindow time.Duration
	// MinPaymentWindow is the shortest window a price or a request may set (at least
	// order.MinPaymentTimeout).
	MinPaymentWindow time.Duration
	// PriceCacheTTL is how long a price read from the list is used before it is read again;
	// 0: read for every order. Setting a price forgets it at once on this replica only.
	PriceCacheTTL time.Duration
	// PerBuyer and PerSKU bound how fast orders are placed, per buyer and per SKU, on this
	// replica; a zero Rate is no limit.
	PerBuyer, PerSKU RateLimit
}

// Service runs the order use cases.
type Service struct {
	repo     Repository
	prices   *priceCache
	log      *slog.Logger
	policy   Policy
	perBuyer *limiter // nil: no limit
	perSKU   *limiter
	now      func() time.Time
	newID    func() string
	meters   metric.MeterProvider
	rec      *recorder
	gate     *gate.Gate    // nil: no flash-sale gate
	soldOut  *soldOutCache // nil: sold_out answers are not remembered
}

// Option changes a Service built by New; tests use them to fix the clock or the ids, or to
// read the metrics.
type Option func(*Service)

// WithClock makes the service read the time from now.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// New returns a Service storing orders in repo and pricing them from prices, by policy. Its
// instruments (docs/observability.md) are made here, once, on the global MeterProvider unless
// an Option says otherwise.
func New(repo Repository, prices PriceList, log *slog.Logger, policy Policy, opts ...Option) *Service {
	policy.MinPaymentWindow = max(policy.MinPaymentWindow, order.MinPaymentTimeout)
	s := &Service{
		repo:   repo,
		log:    log,
		policy: policy,
		// PostgreSQL keeps microseconds: truncating here makes what the service returns
		// equal to what it reads back later.
		now:    func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		newID:  func() string { return uuid.Must(uuid.NewV7()).String() },
		meters: otel.GetMeterProvider(),
	}
	for _, o := range opts {
		o(s)
	}
	s.rec = newRecorder(s.meters, repo, s.now)
	s.prices = newPriceCache(prices, policy.PriceCacheTTL, s.now)
	s.perBuyer, s.perSKU = newLimiter("buyer", policy.PerBuyer), newLimiter("sku", policy.PerSKU)
	return s
}

// Get returns the order with id, or order.ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (*order.Order, error) {
	o, err := s.repo.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get order %s: %w", id, err)
	}
	return o, nil
}

// MaxListLimit bounds one page of ListOrders.
const MaxListLimit = 100

// ListOrders returns up to limit (1..MaxListLimit) of buyerID's orders, newest first, after
// the order before (empty: from the newest); order.ErrInvalidBuyer for an empty buyer.
func (s *Service) ListOrders(ctx context.Context, buyerID, before string, limit int) ([]*order.Order, error) {
	if buyerID == "" {
		return nil, fmt.Errorf("%w: buyer_id required", order.ErrInvalidBuyer)
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, fmt.Errorf("list orders: limit %d not between 1 and %d", limit, MaxListLimit)
	}
	orders, err := s.repo.ListByBuyer(ctx, buyerID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	return orders, nil
}

// encode turns evs into outbox messages stamped with the service clock.
func (s *Service) encode(evs ...events.Event) ([]events.Message, error) {
	msgs := make([]events.Message, len(evs))
	for i, ev := range evs {
		var err error
		if msgs[i], err = events.Encode(ev, s.now()); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}
