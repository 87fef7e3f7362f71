package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

// errNoDeadline marks a fire for an order without a deadline row.
var errNoDeadline = errors.New("no deadline")

// Fire handles the scheduled message of an order's deadline: if the deadline is still
// scheduled and has passed, it becomes expired and timeout.expired is emitted, in one
// transaction. A deadline already resolved (cancelled, or expired by the sweeper) makes it a
// no-op; so does an unknown order. The deadline row is the idempotency key here, under its
// row lock, so no inbox claim is needed: a redelivered fire finds it expired.
//
// A fire that arrives before the deadline (the NATS server's clock ahead of ours) returns an
// error wrapping a *deadline.NotDueError: the consumer redelivers it when it is due, and the
// sweeper is there should it give up.
func (s *Service) Fire(ctx context.Context, orderID string) error {
	var outcome error
	_, err := s.store.Within(ctx, nil, func(tx Tx) ([]events.Message, error) {
		locked, err := tx.Lock(ctx, []string{orderID})
		if err != nil {
			return nil, err
		}
		d := locked[orderID]
		if d == nil {
			outcome = errNoDeadline
			return nil, nil
		}
		if err := d.Expire(s.now()); err != nil {
			if errors.Is(err, deadline.ErrResolved) {
				outcome = err
				return nil, nil
			}
			return nil, err // ErrNotDue: roll back, retry later
		}
		if err := tx.Save(ctx, []*deadline.Deadline{d}); err != nil {
			return nil, err
		}
		msg, err := s.expiredEvent(d)
		if err != nil {
			return nil, err
		}
		return []events.Message{msg}, nil
	})
	if err != nil {
		return fmt.Errorf("fire deadline %s: %w", orderID, err)
	}
	switch {
	case errors.Is(outcome, errNoDeadline):
		s.log.WarnContext(ctx, "fired schedule for an order without deadline; ignored", "order_id", orderID)
	case outcome != nil:
		s.log.DebugContext(ctx, "fired schedule for a resolved deadline; ignored", "order_id", orderID, "reason", outcome.Error())
	default:
		s.log.InfoContext(ctx, "deadline expired", "order_id", orderID, "by", "schedule")
	}
	return nil
}

// Sweep expires every scheduled deadline that has passed, in transactions of up to the
// sweep batch, emitting timeout.expired for each; it returns how many it expired. It is the
// backstop behind the scheduled messages (a schedule lost, never published, or cancelled by
// mistake). Rows a fire handler or another sweeper holds are skipped, not waited for.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		n := 0
		_, err := s.store.Within(ctx, nil, func(tx Tx) ([]events.Message, error) {
			now := s.now()
			due, err := tx.LockDue(ctx, now, s.sweepBatch)
			if err != nil {
				return nil, err
			}
			msgs := make([]events.Message, 0, len(due))
			expired := make([]*deadline.Deadline, 0, len(due))
			for _, d := range due {
				if err := d.Expire(now); err != nil {
					return nil, err // cannot happen: LockDue returns scheduled, due rows
				}
				expired = append(expired, d.Deadline)
				msg, err := s.expiredEvent(d.Deadline)
				if err != nil {
					return nil, err
				}
				if d.Traceparent != "" { // the order's trace, not the sweep's (it has none)
					msg.Headers = map[string]string{"traceparent": d.Traceparent}
				}
				msgs = append(msgs, msg)
			}
			n = len(due)
			return msgs, tx.Save(ctx, expired)
		})
		if err != nil {
			return total, fmt.Errorf("sweep deadlines: %w", err)
		}
		total += n
		if n < s.sweepBatch {
			if total > 0 {
				s.log.InfoContext(ctx, "sweeper expired overdue deadlines", "count", total)
			}
			return total, nil
		}
	}
}

// Sweeper returns a loop that runs Sweep every interval until ctx is done, then returns nil.
// A failed sweep is logged and retried on the next tick, never fatal.
func (s *Service) Sweeper(interval time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "sweep failed; retrying next tick", "err", err, "interval", interval)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}
