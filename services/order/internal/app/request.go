package app

import (
	"context"
	"fmt"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// request runs one buyer or operator request on order id: apply decides, and when it reports
// a change the event ev builds is written to the outbox in the same transaction. A repeated
// request (apply reports no change) emits nothing. It returns the order as committed.
func (s *Service) request(ctx context.Context, op, id string, apply func(*order.Order) (bool, error), ev func(*order.Order) events.Event) (*order.Order, error) {
	var out *order.Order
	_, err := s.update(ctx, id, nil, func(o *order.Order) ([]events.Message, error) {
		changed, err := apply(o)
		if err != nil {
			return nil, err
		}
		out = o
		if !changed {
			return nil, nil
		}
		return s.encode(ev(o))
	})
	if err != nil {
		return nil, fmt.Errorf("%s order %s: %w", op, id, err)
	}
	return out, nil
}
