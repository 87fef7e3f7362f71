package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// Result says what Follow did with an outcome.
type Result string

// Results of Follow.
const (
	// Applied: the order changed (status or history).
	Applied Result = "applied"
	// Unchanged: the order already reflected the outcome (the same fact reported again).
	Unchanged Result = "unchanged"
	// Duplicate: this message id was processed before; nothing was done.
	Duplicate Result = "duplicate"
	// Ignored: the outcome is not a transition from the order's status (stale or out of
	// order, e.g. stock.released after stock.sold); it was recorded as processed and logged.
	Ignored Result = "ignored"
	// UnknownOrder: no order has the id.
	UnknownOrder Result = "unknown_order"
)

// Apply is one outcome's transition on an order, at the given time; it reports whether it
// changed the order (see the order package's transition methods).
type Apply func(o *order.Order, at time.Time) (changed bool, err error)

// Follow applies the outcome that message in reports about order orderID, in one transaction
// with the inbox claim of in. It returns a nil error for every outcome that retrying cannot
// change — applied, unchanged, duplicate, ignored (order.ErrInvalidTransition, logged), and
// unknown order (logged) — and the error otherwise (the database failed: retry).
//
// An unknown order id is acknowledged, not retried: the order row commits before its
// order.created is even published, so every service learns an order id only after the order
// exists here; an event naming an id we never stored (another environment's, or a forged
// payment callback) will never find its order, and retrying would only delay its dead letter.
func (s *Service) Follow(ctx context.Context, in inbox.Message, orderID, subject string, apply Apply) (Result, error) {
	return s.follow(ctx, &in, orderID, subject, apply)
}

// follow is Follow with an optional inbox claim: nil for an outcome that did not come as a
// message (re-derived by reconciliation from the source of truth).
func (s *Service) follow(ctx context.Context, in *inbox.Message, orderID, subject string, apply Apply) (Result, error) {
	eventID := ""
	if in != nil {
		eventID = in.ID
	}
	result := Unchanged
	duplicate, err := s.update(ctx, orderID, in, func(o *order.Order) ([]events.Message, error) {
		from := o.Status()
		changed, err := apply(o, s.now())
		switch {
		case errors.Is(err, order.ErrInvalidTransition):
			result = Ignored
			s.log.WarnContext(ctx, "outcome ignored: not a transition from the order's status",
				"order_id", orderID, "subject", subject, "event_id", eventID, "status", from.String(), "err", err)
			return nil, nil // commit the inbox claim alone: the redelivery is then a duplicate
		case err != nil:
			return nil, err
		case changed:
			result = Applied
			s.log.InfoContext(ctx, "order follows outcome", "order_id", orderID, "subject", subject,
				"event_id", eventID, "from", from.String(), "to", o.Status().String())
		}
		return nil, nil
	})
	switch {
	case errors.Is(err, order.ErrNotFound):
		s.log.WarnContext(ctx, "outcome for an unknown order acknowledged", "order_id", orderID, "subject", subject, "event_id", eventID)
		return UnknownOrder, nil
	case err != nil:
		return "", fmt.Errorf("follow %s for order %s: %w", subject, orderID, err)
	case duplicate:
		return Duplicate, nil
	}
	return result, nil
}
