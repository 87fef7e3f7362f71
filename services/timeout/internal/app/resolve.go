package app

import (
	"context"
	"fmt"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

// Resolve records that stock resolved the order otherwise — stock.sold (resolution
// deadline.ResolutionSold) or stock.released (deadline.ResolutionReleased): a scheduled
// deadline becomes cancelled and, after the commit, its pending schedule is removed (best
// effort: a fire that still arrives finds the deadline cancelled). An order not known yet
// gets a cancelled row, so its late stock.locked schedules nothing. An expired or cancelled
// deadline is left as it is.
func (s *Service) Resolve(ctx context.Context, in inbox.Message, orderID, resolution string) error {
	early, err := deadline.CancelledBeforeLock(orderID, resolution, s.now())
	if err != nil {
		return fmt.Errorf("resolve deadline: %w", err)
	}
	cancelled := false
	_, err = s.store.Within(ctx, &in, func(tx Tx) ([]events.Message, error) {
		inserted, err := tx.Insert(ctx, []Traced{{Deadline: early, Traceparent: telemetry.Traceparent(ctx)}})
		if err != nil || inserted[0] {
			return nil, err
		}
		d, err := tx.Lock(ctx, orderID)
		if err != nil {
			return nil, err
		}
		if !d.Cancel(resolution, s.now()) {
			return nil, nil
		}
		cancelled = true
		return nil, tx.Save(ctx, d)
	})
	if err != nil {
		return fmt.Errorf("resolve deadline %s: %w", orderID, err)
	}
	if cancelled {
		if err := s.cancel(ctx, orderID); err != nil {
			s.log.WarnContext(ctx, "cancel schedule failed; its fire will be a no-op", "order_id", orderID, "err", err)
		}
		s.log.DebugContext(ctx, "deadline cancelled", "order_id", orderID, "resolution", resolution)
	}
	return nil
}
