// Package consumers names payment-adapter's durable consumers and the use case each runs:
// natsx.On decodes the event, calls the app with the message's inbox identity and marks the
// error as the consumer declares, and natsx.Consume maps it to the ack (nil → Ack, permanent
// or malformed → dead letter and Term, anything else → Nak with backoff). Nothing else.
package consumers

import (
	"context"
	"errors"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
)

// Durable consumer names; each is also the consumer name of its inbox rows.
const (
	OrderCreated         = "payment-adapter-order-created"
	StockSellFailed      = "payment-adapter-stock-sell-failed"
	OrderRefundRequested = "payment-adapter-order-refund-requested"
	RefundRequested      = "payment-adapter-refund-requested"
)

// All returns payment-adapter's consumers:
//
//	payment-adapter-order-created           ORDER  order.created(.>)       keep the order's total
//	payment-adapter-stock-sell-failed       STOCK  stock.sell_failed       refund that payment
//	payment-adapter-order-refund-requested  ORDER  order.refund_requested  refund the order's payments
//	payment-adapter-refund-requested        PAYMENT payment.refund_requested ask the provider for a recorded refund
//
// The first three only record refund requests; the fourth makes the provider call, outside
// any transaction. A refund of a payment never issued, or a refund request of no recorded
// refund, is poison (app.ErrPaymentUnknown, app.ErrRefundUnknown: money may be involved, a
// human looks at the dead letter). A provider that fails transiently
// (app.ErrProviderUnavailable) is an outage: retried with backoff up to the consumer's
// OutageMaxDeliver, not its MaxDeliver, and the unconfirmed refunds job asks again after
// that. Every other error is retried.
//
// payment-adapter-order-created is natsx.ConsumerSpec.Combined for PAYMENT_COMBINE_MAX_BATCH
// (maxBatch).
func All(svc *app.Service, maxBatch int) []service.Consumer {
	return []service.Consumer{
		{Spec: spec(natsx.StreamOrder, OrderCreated, events.SubjectOrderCreated, events.SubjectOrderCreated+".>").Combined(maxBatch),
			Handle: natsx.On(OrderCreated, natsx.Errors{}, svc.RememberOrder)},
		{Spec: spec(natsx.StreamStock, StockSellFailed, events.SubjectStockSellFailed),
			Handle: natsx.On(StockSellFailed, natsx.Errors{Permanent: []error{app.ErrPaymentUnknown}},
				func(ctx context.Context, in inbox.Message, ev events.StockSellFailed) error {
					return svc.RefundPayment(ctx, in, ev.PaymentID, "sell_failed: "+ev.Reason)
				})},
		{Spec: spec(natsx.StreamOrder, OrderRefundRequested, events.SubjectOrderRefundRequested),
			Handle: natsx.On(OrderRefundRequested, natsx.Errors{},
				func(ctx context.Context, in inbox.Message, ev events.OrderRefundRequested) error {
					reason := "refund_requested"
					if ev.Reason != "" {
						reason += ": " + ev.Reason
					}
					return svc.RefundOrder(ctx, in, ev.OrderID, reason)
				})},
		{Spec: spec(natsx.StreamPayment, RefundRequested, events.SubjectPaymentRefundRequested),
			Handle: natsx.On(RefundRequested, natsx.Errors{Permanent: []error{app.ErrRefundUnknown}},
				func(ctx context.Context, in inbox.Message, ev events.PaymentRefundRequested) error {
					err := svc.ExecuteRefund(ctx, in, ev)
					if errors.Is(err, app.ErrProviderUnavailable) {
						return natsx.Unavailable(err)
					}
					return err
				})},
	}
}

func spec(stream, durable string, subjects ...string) natsx.ConsumerSpec {
	return natsx.ConsumerSpec{Stream: stream, Durable: durable, FilterSubjects: subjects}
}
