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

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// ErrIdempotencyConflict is returned by PlaceOrder when the idempotency key was already used
// for a different request.
var ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")

// Inbound identifies the message a use case consumes: the durable consumer and the event id.
type Inbound struct {
	Consumer  string
	MessageID string
}

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
	UpdateWith(ctx context.Context, id string, in *Inbound, fn func(*order.Order) ([]events.Message, error)) (duplicate bool, err error)
	// ListStuck returns up to limit orders still pending or awaiting_payment whose payment
	// deadline is before cutoff, oldest deadline first.
	ListStuck(ctx context.Context, cutoff time.Time, limit int) ([]*order.Order, error)
}

// Service runs the order use cases.
type Service struct {
	repo           Repository
	log            *slog.Logger
	paymentTimeout time.Duration
	now            func() time.Time
	newID          func() string
}

// Option changes a Service built by New; tests use them to fix the clock or the ids.
type Option func(*Service)

// WithClock makes the service read the time from now.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// New returns a Service on repo; paymentTimeout is the window of an order whose request
// names none.
func New(repo Repository, log *slog.Logger, paymentTimeout time.Duration, opts ...Option) *Service {
	s := &Service{
		repo:           repo,
		log:            log,
		paymentTimeout: paymentTimeout,
		// PostgreSQL keeps microseconds: truncating here makes what the service returns
		// equal to what it reads back later.
		now:   func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		newID: func() string { return uuid.Must(uuid.NewV7()).String() },
	}
	for _, o := range opts {
		o(s)
	}
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
