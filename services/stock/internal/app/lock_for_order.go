package app

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// LockForOrder locks every line of an order or none, until deadline, and emits stock.locked or
// stock.lock_rejected. A rejection (not enough stock, unknown SKU) is an outcome, not an
// error; a replayed order returns its first outcome and emits nothing.
func (s *Service) LockForOrder(ctx context.Context, in *Inbound, orderID string, lines []stock.Line, deadline time.Time, operator string) (postgres.LockResult, error) {
	lines, err := stock.NormalizeLines(lines)
	if err != nil {
		return postgres.LockResult{}, err
	}
	var res postgres.LockResult
	dup, err := s.inTx(ctx, in, func(tx *postgres.Tx) ([]events.Event, error) {
		var err error
		if res, err = tx.LockOrder(ctx, orderID, lines, deadline, operator); err != nil || res.Duplicate {
			return nil, err
		}
		if !res.Locked {
			return []events.Event{events.StockLockRejected{OrderID: orderID, Reason: res.Reason, SKU: res.SKU}}, nil
		}
		ev := events.StockLocked{OrderID: orderID, PaymentDeadline: deadline}
		for _, l := range lines {
			ev.Lines = append(ev.Lines, events.Line{SKU: l.SKU, Qty: l.Qty.Int64()})
		}
		return []events.Event{ev}, nil
	})
	if dup {
		res = postgres.LockResult{OrderID: orderID, Duplicate: true}
	}
	return res, err
}

// RejectInvalid answers an order.created whose lines stock cannot take at all (a malformed SKU,
// a quantity out of range) with stock.lock_rejected, so the order ends rejected instead of
// waiting forever. Nothing else changes.
func (s *Service) RejectInvalid(ctx context.Context, in *Inbound, orderID string, cause error) error {
	_, err := s.inTx(ctx, in, func(*postgres.Tx) ([]events.Event, error) {
		return []events.Event{events.StockLockRejected{OrderID: orderID, Reason: postgres.RejectInvalidOrder}}, nil
	})
	if err != nil {
		return fmt.Errorf("reject order %s (%v): %w", orderID, cause, err)
	}
	return nil
}
