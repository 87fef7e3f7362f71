// Package consumers turns the messages payment-adapter listens to into use cases: decode,
// call the app, and return an error that natsx maps to the ack (nil → Ack, natsx.Permanent or
// a malformed event → Term and dead letter, anything else → Nak with backoff). Nothing else.
package consumers

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
)

// Durable consumer names; each is also the consumer name of its inbox rows.
const (
	OrderCreated         = "payment-adapter-order-created"
	StockSellFailed      = "payment-adapter-stock-sell-failed"
	OrderRefundRequested = "payment-adapter-order-refund-requested"
)

// All returns payment-adapter's consumers:
//
//	payment-adapter-order-created           ORDER  order.created           keep the order's total
//	payment-adapter-stock-sell-failed       STOCK  stock.sell_failed       refund that payment
//	payment-adapter-order-refund-requested  ORDER  order.refund_requested  refund the order's payments
func All(svc *app.Service) []service.Consumer {
	return []service.Consumer{
		{Spec: spec(natsx.StreamOrder, OrderCreated, events.SubjectOrderCreated), Handle: onOrderCreated(svc)},
		{Spec: spec(natsx.StreamStock, StockSellFailed, events.SubjectStockSellFailed), Handle: onStockSellFailed(svc)},
		{Spec: spec(natsx.StreamOrder, OrderRefundRequested, events.SubjectOrderRefundRequested), Handle: onOrderRefundRequested(svc)},
	}
}

func spec(stream, durable string, subjects ...string) natsx.ConsumerSpec {
	return natsx.ConsumerSpec{Stream: stream, Durable: durable, FilterSubjects: subjects}
}

func onOrderCreated(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		env, ev, err := events.Decode[events.OrderCreated](msg.Data())
		if err != nil {
			return fmt.Errorf("%s: %w", OrderCreated, err)
		}
		return svc.RememberOrder(ctx, app.Inbound{Consumer: OrderCreated, MessageID: env.ID}, ev)
	}
}

func onStockSellFailed(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		env, ev, err := events.Decode[events.StockSellFailed](msg.Data())
		if err != nil {
			return fmt.Errorf("%s: %w", StockSellFailed, err)
		}
		err = svc.RefundPayment(ctx, app.Inbound{Consumer: StockSellFailed, MessageID: env.ID}, ev.PaymentID, "sell_failed: "+ev.Reason)
		if errors.Is(err, app.ErrPaymentUnknown) {
			return natsx.Permanent(err)
		}
		return err
	}
}

func onOrderRefundRequested(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		env, ev, err := events.Decode[events.OrderRefundRequested](msg.Data())
		if err != nil {
			return fmt.Errorf("%s: %w", OrderRefundRequested, err)
		}
		reason := "refund_requested"
		if ev.Reason != "" {
			reason += ": " + ev.Reason
		}
		return svc.RefundOrder(ctx, app.Inbound{Consumer: OrderRefundRequested, MessageID: env.ID}, ev.OrderID, reason)
	}
}
