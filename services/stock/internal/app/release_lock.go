package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// ReleaseLock returns an order's held locks to available, for a timeout (ChangeReleaseTimeout)
// or a cancellation (ChangeReleaseCancel), and emits stock.released. Locks already sold or
// released, or an order that was rejected, make it a reported no-op. An order stock has not
// seen yet returns an error wrapping ErrOrderUnknown (retry later). A timeout before the
// locks' deadline on the service's clock changes nothing and returns an error wrapping a
// *stock.NotYetDueError (retry after its Wait); the message is not marked processed.
func (s *Service) ReleaseLock(ctx context.Context, in *inbox.Message, orderID string, reason stock.ChangeType, operator string) (Resolution, error) {
	var step func(*stock.Lock) (stock.Movement, error)
	var why string
	switch reason {
	case stock.ChangeReleaseTimeout:
		step, why = func(l *stock.Lock) (stock.Movement, error) { return l.ReleaseTimeout(s.now()) }, events.ReleaseTimeout
	case stock.ChangeReleaseCancel:
		step, why = (*stock.Lock).ReleaseCancel, events.ReleaseCancel
	default:
		return Resolution{}, fmt.Errorf("release with change type %q", reason)
	}
	return s.resolve(ctx, resolveCall{in: in, orderID: orderID, operator: operator, kind: stepRelease, step: step,
		settle: func(_ context.Context, _ Tx, res *Resolution, err error) ([]events.Event, error) {
			if errors.Is(err, stock.ErrNoLock) && !errors.Is(err, stock.ErrOrderUnknown) {
				res.NoOp = "order holds no lock (rejected)"
				return nil, nil
			}
			if err != nil || !res.Applied {
				return nil, err
			}
			return []events.Event{events.StockReleased{OrderID: orderID, Reason: why}}, nil
		}})
}
