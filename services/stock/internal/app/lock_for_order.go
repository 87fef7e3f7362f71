package app

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// LockForOrder locks every line of an order or none, until deadline, and emits stock.locked or
// stock.lock_rejected. A rejection (not enough stock, unknown SKU) is an outcome, not an
// error; a replayed order returns its first outcome and emits nothing. Concurrent calls are
// combined: they lock in one transaction, in arrival order, each order all or none.
func (s *Service) LockForOrder(ctx context.Context, in *Inbound, orderID string, lines []stock.Line, deadline time.Time, operator string) (postgres.LockResult, error) {
	lines, err := stock.NormalizeLines(lines)
	if err != nil {
		return postgres.LockResult{}, err
	}
	return s.locks.Do(ctx, lockCall{ctx: ctx, in: in, req: postgres.LockRequest{OrderID: orderID, Lines: lines, Deadline: deadline, Operator: operator}})
}

// lockCall is one LockForOrder waiting for its batch.
type lockCall struct {
	ctx context.Context
	in  *Inbound
	req postgres.LockRequest
}

// lockOrders locks a batch of orders in one transaction.
func (s *Service) lockOrders(ctx context.Context, calls []lockCall) ([]combine.Result[postgres.LockResult], error) {
	units := make([]*unit, len(calls))
	for i, c := range calls {
		units[i] = &unit{ctx: c.ctx, in: c.in}
	}
	out := make([]combine.Result[postgres.LockResult], len(calls))
	err := s.inTx(ctx, units, func(tx *postgres.Tx, fresh []int) error {
		reqs := make([]postgres.LockRequest, len(fresh))
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
			switch {
			case res.Duplicate:
			case !res.Locked:
				units[i].events = []events.Event{events.StockLockRejected{OrderID: res.OrderID, Reason: res.Reason, SKU: res.SKU}}
			default:
				ev := events.StockLocked{OrderID: res.OrderID, PaymentDeadline: res.Deadline}
				for _, l := range res.Lines {
					ev.Lines = append(ev.Lines, events.Line{SKU: l.SKU, Qty: l.Qty.Int64()})
				}
				units[i].events = []events.Event{ev}
			}
		}
		return nil
	})
	for i, u := range units {
		if u.dup {
			out[i].Value = postgres.LockResult{OrderID: calls[i].req.OrderID, Duplicate: true}
		}
	}
	return out, err
}

// RejectInvalid answers an order.created whose lines stock cannot take at all (a malformed SKU,
// a quantity out of range) with stock.lock_rejected, so the order ends rejected instead of
// waiting forever. Nothing else changes.
func (s *Service) RejectInvalid(ctx context.Context, in *Inbound, orderID string, cause error) error {
	u := &unit{ctx: ctx, in: in}
	err := s.one(ctx, u, func(*postgres.Tx) error {
		u.events = []events.Event{events.StockLockRejected{OrderID: orderID, Reason: postgres.RejectInvalidOrder}}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reject order %s (%v): %w", orderID, cause, err)
	}
	return nil
}
