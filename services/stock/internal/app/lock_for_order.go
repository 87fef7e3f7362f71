package app

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// LockForOrder locks every line of an order or none, until deadline, and emits stock.locked or
// stock.lock_rejected. A rejection (not enough stock, unknown SKU) is an outcome, not an
// error; a replayed order returns its first outcome and emits nothing. Concurrent calls are
// combined: they lock in one transaction, in arrival order, each order all or none.
//
// Lines are validated here, once (stock.ParseLines). Lines stock cannot take at all (a
// malformed SKU, a quantity out of range) answer a consumed order.created (in != nil) with
// stock.lock_rejected, reason invalid_order, so the order ends rejected instead of waiting
// forever; the result says so and the error is nil. An HTTP caller (in == nil) gets the
// validation error (ErrBadOrder, ErrBadSKU, ErrBadQuantity) and nothing is emitted.
//
// Every outcome is counted in stockflow.stock.lock.outcomes when it commits, even if the
// caller has stopped waiting (its redelivery then counts a duplicate); every answer without an
// error is timed in stockflow.stock.lock.duration (the wait for its batch included).
func (s *Service) LockForOrder(ctx context.Context, in *inbox.Message, orderID string, lines []events.Line, deadline time.Time, operator string) (stock.LockResult, error) {
	start := time.Now()
	res, err := s.lockForOrder(ctx, in, orderID, lines, deadline, operator)
	if err == nil {
		s.rec.lockAnswered(ctx, start, res)
	}
	return res, err
}

func (s *Service) lockForOrder(ctx context.Context, in *inbox.Message, orderID string, lines []events.Line, deadline time.Time, operator string) (stock.LockResult, error) {
	parsed, err := stock.ParseLines(lines)
	switch {
	case err != nil && in == nil:
		return stock.LockResult{}, err
	case err != nil:
		return stock.LockResult{OrderID: orderID, Reason: stock.RejectInvalidOrder}, s.rejectInvalid(ctx, in, orderID, err)
	}
	return s.locks.Do(ctx, lockCall{ctx: ctx, in: in, req: stock.LockRequest{OrderID: orderID, Lines: parsed, Deadline: deadline, Operator: operator}})
}

// lockCall is one LockForOrder waiting for its batch.
type lockCall struct {
	ctx context.Context
	in  *inbox.Message
	req stock.LockRequest
}

// lockOrders locks a batch of orders in one transaction.
func (s *Service) lockOrders(ctx context.Context, calls []lockCall) ([]combine.Result[stock.LockResult], error) {
	units := make([]*outbox.Unit, len(calls))
	for i, c := range calls {
		units[i] = &outbox.Unit{In: c.in}
	}
	out := make([]combine.Result[stock.LockResult], len(calls))
	err := s.store.InBatch(ctx, units, func(tx Tx, fresh []int) error {
		reqs := make([]stock.LockRequest, len(fresh))
		for k, i := range fresh {
			reqs[k] = calls[i].req
		}
		results, err := tx.LockOrders(ctx, reqs)
		if err != nil {
			return err
		}
		for k, i := range fresh {
			res := results[k]
			out[i].Value = res
			var ev events.Event
			switch {
			case res.Duplicate:
				continue
			case !res.Locked:
				ev = events.StockLockRejected{OrderID: res.OrderID, Reason: res.Reason, SKU: res.SKU}
			default:
				locked := events.StockLocked{OrderID: res.OrderID, PaymentDeadline: res.Deadline}
				for _, l := range res.Lines {
					locked.Lines = append(locked.Lines, events.Line{SKU: l.SKU, Qty: l.Qty.Int64()})
				}
				ev = locked
			}
			if err := s.emit(calls[i].ctx, units[i], ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	for i, u := range units {
		if u.Dup {
			out[i].Value = stock.LockResult{OrderID: calls[i].req.OrderID, Duplicate: true}
		}
		s.rec.lockDecided(calls[i].ctx, out[i].Value)
	}
	return out, nil
}

// rejectInvalid answers the order.created in, whose lines stock cannot take at all (cause),
// with stock.lock_rejected. Nothing else changes.
func (s *Service) rejectInvalid(ctx context.Context, in *inbox.Message, orderID string, cause error) error {
	u := &outbox.Unit{In: in}
	err := s.store.InBatch(ctx, []*outbox.Unit{u}, func(Tx, []int) error {
		return s.emit(ctx, u, events.StockLockRejected{OrderID: orderID, Reason: stock.RejectInvalidOrder})
	})
	if err != nil {
		return fmt.Errorf("reject order %s (%v): %w", orderID, cause, err)
	}
	s.rec.lockDecided(ctx, stock.LockResult{OrderID: orderID, Duplicate: u.Dup, Reason: stock.RejectInvalidOrder})
	return nil
}
