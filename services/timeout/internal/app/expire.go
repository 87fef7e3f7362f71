package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

// Fire handles the scheduled message of an order's deadline: if the deadline is still
// scheduled and has passed, it becomes expired and timeout.expired is emitted, in one
// transaction. A deadline already resolved (cancelled, or expired by the sweeper) makes it a
// no-op; so does an unknown order. The deadline row is the idempotency key here, under its
// row lock, so no inbox claim is needed: a redelivered fire finds it expired. Concurrent fires
// share one transaction (the unpaid orders of a sale expire together).
//
// A fire that arrives before the deadline (the NATS server's clock ahead of ours) returns an
// error wrapping a *deadline.NotDueError: the consumer redelivers it when it is due, and the
// sweeper is there should it give up. The others of its batch are not held back.
func (s *Service) Fire(ctx context.Context, orderID string) error {
	out, err := s.fires.Do(ctx, fireCall{ctx: ctx, orderID: orderID})
	if err != nil {
		return fmt.Errorf("fire deadline %s: %w", orderID, err)
	}
	switch out {
	case noDeadline:
		s.log.WarnContext(ctx, "fired schedule for an order without deadline; ignored", "order_id", orderID)
	case alreadyResolved:
		s.log.DebugContext(ctx, "fired schedule for a resolved deadline; ignored", "order_id", orderID)
	default:
		s.log.InfoContext(ctx, "deadline expired", "order_id", orderID, "by", "schedule")
	}
	return nil
}

// fireCall is one fired schedule waiting for its batch.
type fireCall struct {
	ctx     context.Context // the caller's, for the trace timeout.expired carries
	orderID string
}

// fired is what a fire did.
type fired int

const (
	expired         fired = iota // the deadline expired now: timeout.expired is in the outbox
	noDeadline                   // the order has no deadline
	alreadyResolved              // cancelled, or expired before
)

// fireAll expires the deadlines of calls in one transaction: locked in one statement, saved in
// one. A fire before its deadline fails alone.
func (s *Service) fireAll(ctx context.Context, calls []fireCall) ([]combine.Result[fired], error) {
	units := make([]*outbox.Unit, len(calls)) // no inbox claims: the deadline row is the key
	ids := make([]string, len(calls))
	for i, c := range calls {
		units[i], ids[i] = &outbox.Unit{}, c.orderID
	}
	out := make([]combine.Result[fired], len(calls))
	err := s.store.Batch(ctx, units, func(tx Tx, fresh []int) error {
		locked, err := tx.Lock(ctx, ids)
		if err != nil {
			return err
		}
		now := s.now()
		var changed []*deadline.Deadline
		for _, i := range fresh {
			d := locked[calls[i].orderID]
			if d == nil {
				out[i].Value = noDeadline
				continue
			}
			if err := d.Expire(now); errors.Is(err, deadline.ErrResolved) { // an order fired twice in calls: the first expired it
				out[i].Value = alreadyResolved
				continue
			} else if err != nil {
				units[i].Err = err // not due: retried later, alone
				continue
			}
			msg, err := s.expiredEvent(d)
			if err != nil {
				return err
			}
			msg.Headers = map[string]string{}
			telemetry.InjectMap(calls[i].ctx, msg.Headers)
			units[i].Msgs, changed = []events.Message{msg}, append(changed, d)
		}
		return tx.Save(ctx, changed)
	})
	for i, u := range units {
		out[i].Err = u.Err
	}
	return out, err
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
