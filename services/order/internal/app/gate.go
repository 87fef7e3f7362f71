package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// ErrSoldOut is returned by PlaceOrder when the flash-sale gate has nothing left of a line's
// armed SKU: the buyer is turned away before anything is stored or published.
var ErrSoldOut = errors.New("sold out")

// WithGate puts the flash-sale gate g in front of order creation (nil: no gate).
func WithGate(g *gate.Gate) Option { return func(s *Service) { s.gate = g } }

// admitThroughGate asks the gate for o's lines. It returns admitted=true when the gate took
// units for o (they must be given back if o is not stored), ErrSoldOut when an armed SKU has
// too few left, and nil otherwise (no SKU armed, or Redis not answering: the database path).
// A sold_out is remembered (WithSoldOutTTL); when Redis does not answer, what is remembered
// still turns the buyer away: in a storm that is a request that waited long in this process,
// and the database path would cost it an order row for nothing.
func (s *Service) admitThroughGate(ctx context.Context, o *order.Order) (admitted bool, err error) {
	if s.gate == nil {
		return false, nil
	}
	items := o.Items()
	lines := make([]gate.Line, len(items))
	for i, it := range items {
		lines[i] = gate.Line{SKU: it.SKU(), Qty: it.Qty().Int64()}
	}
	v, sku := s.gate.Take(ctx, o.ID(), lines)
	if v == gate.Bypassed {
		if sku, ok := s.soldOut.lookup(lines); ok {
			s.rec.soldOutCached(ctx)
			return false, fmt.Errorf("%w: %s", ErrSoldOut, sku)
		}
	}
	s.rec.gated(ctx, v)
	switch v {
	case gate.SoldOut:
		for _, l := range lines {
			if l.SKU == sku {
				s.soldOut.remember(sku, l.Qty)
			}
		}
		return false, fmt.Errorf("%w: %s", ErrSoldOut, sku)
	case gate.Admitted:
		return true, nil
	}
	return false, nil
}

// giveBackUnstored returns the gate's units of an order the gate admitted but that was not
// stored (the store failed, or the idempotency key named an earlier order). A failure is
// logged: the gate job finds a take without an order and gives it back.
func (s *Service) giveBackUnstored(ctx context.Context, orderID string) {
	if _, err := s.gate.GiveBack(ctx, orderID); err != nil {
		s.log.WarnContext(ctx, "gate: could not give back the units of an order not stored", "order_id", orderID, "err", err)
	}
}

// GiveBack returns to the gate what orderID took from it: stock rejected its lock, released
// it, or restocked its units. It is idempotent (the gate counts each order once) and a no-op
// without a gate; an error is Redis not answering, to be retried.
func (s *Service) GiveBack(ctx context.Context, orderID string) error {
	n, err := s.gate.GiveBack(ctx, orderID)
	if err != nil {
		return err
	}
	if n > 0 {
		// The units are for sale again: the next buyer on this replica asks the gate at once
		// (other replicas within their WithSoldOutTTL).
		s.soldOut.forget()
		s.log.DebugContext(ctx, "gate: units given back", "order_id", orderID, "qty", n)
	}
	return nil
}

// TakeLocked counts against the gate what stock locked for orderID, when the gate did not
// admit the order (Redis did not answer its Take): the gate then comes down with the
// database instead of letting buyers through to be rejected. Idempotent, and a no-op for an
// order the gate admitted; an error is Redis not answering, to be retried.
func (s *Service) TakeLocked(ctx context.Context, orderID string, lines []gate.Line) error {
	n, err := s.gate.TakeLocked(ctx, orderID, lines)
	if n > 0 {
		s.log.DebugContext(ctx, "gate: a bypassed order's lock counted", "order_id", orderID, "qty", n)
	}
	return err
}

// HasGate reports whether the service has a flash-sale gate.
func (s *Service) HasGate() bool { return s.gate != nil }
