package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// resolveCall asks to move every lock of an order one step (sell, release, ship, refund).
type resolveCall struct {
	ctx      context.Context
	in       *inbox.Message
	orderID  string
	operator string
	step     func(*stock.Lock) (stock.Movement, error)
	// settle decides, inside the transaction, what the outcome emits; an error there fails
	// this call alone (it must not come after stock moved: the batch is then rolled back).
	settle func(ctx context.Context, tx Tx, res *Resolution, err error) ([]events.Event, error)
	// paymentID is recorded as the payment that sold the order, when the step applied.
	paymentID string
	// kind names the resolution in the metrics.
	kind step
}

// resolve runs c in the next batch of lock resolutions. Every outcome is counted in
// stockflow.stock.resolve.outcomes when it commits, even if the caller has stopped waiting;
// every answer without an error is timed in stockflow.stock.resolve.duration.
func (s *Service) resolve(ctx context.Context, c resolveCall) (Resolution, error) {
	start := time.Now()
	c.ctx = ctx
	res, err := s.resolves.Do(ctx, c)
	if err == nil {
		s.rec.resolveAnswered(ctx, c.kind, start, res)
	}
	return res, err
}

// resolveOrders moves the locks of a batch of orders in one transaction. A lock already past
// the step (ErrAlreadyResolved) makes that call a reported no-op.
func (s *Service) resolveOrders(ctx context.Context, calls []resolveCall) ([]combine.Result[Resolution], error) {
	units := make([]*outbox.Unit, len(calls))
	for i, c := range calls {
		units[i] = &outbox.Unit{In: c.in}
	}
	out := make([]combine.Result[Resolution], len(calls))
	written := make([][]stock.LedgerEntry, len(calls)) // their ids are known after the commit
	err := s.store.InBatch(ctx, units, func(tx Tx, fresh []int) error {
		ress := make([]Resolution, len(fresh))
		ups := make([]stock.LockUpdate, len(fresh))
		for k, i := range fresh {
			c, res := calls[i], &ress[k]
			res.OrderID = c.orderID
			ups[k] = stock.LockUpdate{OrderID: c.orderID, Operator: c.operator, Step: stepAll(res, c.step)}
		}
		results, err := tx.UpdateLocks(ctx, ups)
		if err != nil {
			return err
		}
		var orders, payments []string
		for k, i := range fresh {
			c, res := calls[i], &ress[k]
			err := outcome(res, results[k])
			evs, err := c.settle(ctx, tx, res, err)
			if err != nil && res.Applied {
				return fmt.Errorf("order %s: %w", c.orderID, err)
			}
			if res.Applied && c.paymentID != "" {
				orders, payments = append(orders, c.orderID), append(payments, c.paymentID)
			}
			out[i].Value, units[i].Err = *res, err
			if err := s.emit(c.ctx, units[i], evs...); err != nil {
				return err
			}
			written[i] = results[k].Entries
		}
		tx.RecordPayments(orders, payments)
		return nil
	})
	for i, u := range units {
		out[i].Value.Duplicate = u.Dup
		if u.Dup {
			out[i].Value.OrderID = calls[i].orderID
		}
		out[i].Err = u.Err
		for _, e := range written[i] {
			out[i].Value.Entries = append(out[i].Value.Entries, LedgerSummary{ID: e.ID, SKU: e.SKU, Type: string(e.Type), Qty: e.Qty})
		}
		if err == nil && u.Err == nil {
			s.rec.resolveDecided(calls[i].ctx, calls[i].kind, out[i].Value)
		}
	}
	return out, err
}

// stepAll moves each lock of an order with step, noting the states in res.
func stepAll(res *Resolution, step func(*stock.Lock) (stock.Movement, error)) func([]*stock.Lock) ([]stock.Movement, error) {
	return func(locks []*stock.Lock) ([]stock.Movement, error) {
		ms := make([]stock.Movement, 0, len(locks))
		for _, l := range locks {
			before := l.State()
			m, err := step(l)
			if err != nil {
				res.State, res.Relocked = string(before), false
				return nil, err
			}
			res.Relocked = res.Relocked || (before == stock.StateReleased && l.State() == stock.StateSold)
			res.State = string(l.State())
			ms = append(ms, m)
		}
		return ms, nil
	}
}

// outcome completes res from what UpdateLocks did and returns the error, if any.
func outcome(res *Resolution, r stock.LockUpdateResult) error {
	if errors.Is(r.Err, stock.ErrAlreadyResolved) {
		res.Relocked = false
		res.NoOp = fmt.Sprintf("locks already %s", res.State)
		return nil
	}
	if r.Err != nil {
		res.Relocked = false
		return fmt.Errorf("order %s: %w", res.OrderID, r.Err)
	}
	res.Applied = true
	return nil
}
