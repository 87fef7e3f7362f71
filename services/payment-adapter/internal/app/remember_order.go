package app

import (
	"context"
	"fmt"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// RememberOrder keeps the total and currency of a created order, against which callbacks are
// checked. A redelivery, or a second order.created for the same order, changes nothing.
// Concurrent calls share one transaction (every order of a flash sale comes here).
func (s *Service) RememberOrder(ctx context.Context, in inbox.Message, ev events.OrderCreated) error {
	o := payment.OrderTotal{OrderID: ev.OrderID, Total: ev.Total, Currency: ev.Currency, Traceparent: telemetry.Traceparent(ctx),
		PaymentDeadline: ev.PaymentDeadline.UTC()}
	dup, err := s.remembers.Do(ctx, rememberCall{in: in, total: o})
	if err != nil {
		return fmt.Errorf("remember order %s: %w", ev.OrderID, err)
	}
	if dup {
		s.log.DebugContext(ctx, "order.created already processed", "order_id", ev.OrderID, "message_id", in.ID)
	}
	return nil
}

// rememberCall is one order.created waiting for its batch.
type rememberCall struct {
	in    inbox.Message
	total payment.OrderTotal
}

// rememberAll stores the totals of calls in one transaction; each result is whether its
// message was a duplicate.
func (s *Service) rememberAll(ctx context.Context, calls []rememberCall) ([]combine.Result[bool], error) {
	ins := make([]inbox.Message, len(calls))
	totals := make([]payment.OrderTotal, len(calls))
	for i, c := range calls {
		ins[i], totals[i] = c.in, c.total
	}
	dup, err := s.store.RememberOrders(ctx, ins, totals)
	if err != nil {
		return nil, err
	}
	out := make([]combine.Result[bool], len(calls))
	for i := range calls {
		out[i].Value = dup[i]
	}
	return out, nil
}
