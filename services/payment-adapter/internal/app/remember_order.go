package app

import (
	"context"
	"fmt"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// RememberOrder keeps the total and currency of a created order, against which callbacks are
// checked. A redelivery, or a second order.created for the same order, changes nothing.
func (s *Service) RememberOrder(ctx context.Context, in inbox.Message, ev events.OrderCreated) error {
	o := payment.OrderTotal{OrderID: ev.OrderID, Total: ev.Total, Currency: ev.Currency, Traceparent: telemetry.Traceparent(ctx),
		PaymentDeadline: ev.PaymentDeadline.UTC()}
	dup, err := s.store.RememberOrder(ctx, in, o)
	if err != nil {
		return fmt.Errorf("remember order %s: %w", ev.OrderID, err)
	}
	if dup {
		s.log.DebugContext(ctx, "order.created already processed", "order_id", ev.OrderID, "message_id", in.ID)
	}
	return nil
}
