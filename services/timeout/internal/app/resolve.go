package app

import (
	"context"
	"fmt"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

// Resolve records that stock resolved the order otherwise — stock.sold (resolution
// deadline.ResolutionSold) or stock.released (deadline.ResolutionReleased): a scheduled
// deadline becomes cancelled and, after the commit, its pending schedule is removed (best
// effort: a fire that still arrives finds the deadline cancelled). An order not known yet
// gets a cancelled row, so its late stock.locked schedules nothing. An expired or cancelled
// deadline is left as it is. Concurrent calls share one transaction.
func (s *Service) Resolve(ctx context.Context, in inbox.Message, orderID, resolution string) error {
	early, err := deadline.CancelledBeforeLock(orderID, resolution, s.now())
	if err != nil {
		return fmt.Errorf("resolve deadline: %w", err)
	}
	out, err := s.resolves.Do(ctx, resolveCall{ctx: ctx, in: in, early: early, resolution: resolution})
	if err != nil {
		return fmt.Errorf("resolve deadline %s: %w", orderID, err)
	}
	if out == cancelled {
		if err := s.cancel(ctx, orderID); err != nil {
			s.log.WarnContext(ctx, "cancel schedule failed; its fire will be a no-op", "order_id", orderID, "err", err)
		}
		s.log.DebugContext(ctx, "deadline cancelled", "order_id", orderID, "resolution", resolution)
	}
	return nil
}

// resolveCall is one stock.sold or stock.released waiting for its batch.
type resolveCall struct {
	ctx        context.Context // the caller's, for the trace an early row keeps
	in         inbox.Message
	early      *deadline.Deadline // stored when the order has no deadline yet
	resolution string
}

// resolved is what a resolution did.
type resolved int

const (
	leftAsIs    resolved = iota // expired or cancelled before, or the message was processed before
	cancelled                   // a scheduled deadline was cancelled: its schedule is to be removed
	storedEarly                 // the order had no deadline: a cancelled one was stored
)

// resolveAll resolves the deadlines of calls in one transaction: the early rows in one
// statement, the known deadlines locked in one, the cancelled ones saved in one.
func (s *Service) resolveAll(ctx context.Context, calls []resolveCall) ([]combine.Result[resolved], error) {
	units := make([]*outbox.Unit, len(calls))
	for i := range calls {
		units[i] = &outbox.Unit{In: &calls[i].in}
	}
	out := make([]combine.Result[resolved], len(calls))
	err := s.store.Batch(ctx, units, func(tx Tx, fresh []int) error {
		ds := make([]Traced, len(fresh))
		for k, i := range fresh {
			ds[k] = Traced{Deadline: calls[i].early, Traceparent: telemetry.Traceparent(calls[i].ctx)}
		}
		inserted, err := tx.Insert(ctx, ds)
		if err != nil {
			return err
		}
		var known []int // indexes into calls
		var ids []string
		for k, i := range fresh {
			out[i].Value = storedEarly
			if !inserted[k] {
				known, ids = append(known, i), append(ids, calls[i].early.OrderID())
			}
		}
		if len(known) == 0 {
			return nil
		}
		locked, err := tx.Lock(ctx, ids)
		if err != nil {
			return err
		}
		var changed []*deadline.Deadline
		now := s.now()
		for _, i := range known {
			d := locked[calls[i].early.OrderID()]
			if d == nil {
				return fmt.Errorf("deadline of %s: %w after its insert conflicted", calls[i].early.OrderID(), deadline.ErrNotFound)
			}
			out[i].Value = leftAsIs
			if d.Cancel(calls[i].resolution, now) { // an order twice in calls is cancelled by the first
				out[i].Value, changed = cancelled, append(changed, d)
			}
		}
		return tx.Save(ctx, changed)
	})
	for i, u := range units {
		if u.Dup {
			out[i].Value = leftAsIs
		}
	}
	return out, err
}
