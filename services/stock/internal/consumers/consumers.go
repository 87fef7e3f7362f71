// Package consumers turns the messages the stock service listens to into use cases: decode,
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
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Durable consumer names; each is also the consumer name of its inbox rows.
const (
	OrderCreated     = "stock-order-created"
	OrderRequests    = "stock-order-requests"
	PaymentSucceeded = "stock-payment-succeeded"
	TimeoutExpired   = "stock-timeout-expired"
)

// All returns the stock service's consumers.
func All(svc *app.Service) []service.Consumer {
	return []service.Consumer{
		{Spec: combined(spec(natsx.StreamOrder, OrderCreated, events.SubjectOrderCreated)), Handle: onOrderCreated(svc)},
		{Spec: spec(natsx.StreamOrder, OrderRequests, events.SubjectOrderCancelRequested, events.SubjectOrderRefundRequested, events.SubjectOrderShipped), Handle: onOrderRequest(svc)},
		{Spec: combined(spec(natsx.StreamPayment, PaymentSucceeded, events.SubjectPaymentSucceeded)), Handle: onPaymentSucceeded(svc)},
		{Spec: combined(spec(natsx.StreamTimeout, TimeoutExpired, events.SubjectTimeoutExpired)), Handle: onTimeoutExpired(svc)},
	}
}

func spec(stream, durable string, subjects ...string) natsx.ConsumerSpec {
	return natsx.ConsumerSpec{Stream: stream, Durable: durable, FilterSubjects: subjects}
}

// combinedWorkers is how many messages a consumer whose use case is combined handles at once.
// Its handlers wait in the service's batcher without holding a database connection, so a
// fetched batch of messages is locked (or sold, or released) in one or two transactions.
const combinedWorkers = 128

func combined(s natsx.ConsumerSpec) natsx.ConsumerSpec {
	s.Workers, s.MaxAckPending = combinedWorkers, 4*combinedWorkers
	return s
}

func inbound(consumer string, env events.Envelope) *app.Inbound {
	return &app.Inbound{Consumer: consumer, ID: env.ID}
}

// classify: an order stock has not seen yet may arrive later (retry); any other
// domain refusal will never succeed (terminate, visible as a dead letter).
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, stock.ErrOrderUnknown):
		return err
	case errors.Is(err, stock.ErrLockNotHeld), errors.Is(err, stock.ErrBadOrder), errors.Is(err, stock.ErrBadQuantity), errors.Is(err, stock.ErrBadSKU):
		return natsx.Permanent(err)
	default:
		return err
	}
}

func onOrderCreated(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		env, ev, err := events.Decode[events.OrderCreated](msg.Data())
		if err != nil {
			return err
		}
		in := inbound(OrderCreated, env)
		lines := make([]stock.Line, len(ev.Items))
		for i, it := range ev.Items {
			n, err := stock.NewQty(it.Qty)
			if err != nil {
				return svc.RejectInvalid(ctx, in, ev.OrderID, err)
			}
			lines[i] = stock.Line{SKU: it.SKU, Qty: n}
		}
		if _, err := stock.NormalizeLines(lines); err != nil {
			return svc.RejectInvalid(ctx, in, ev.OrderID, err)
		}
		_, err = svc.LockForOrder(ctx, in, ev.OrderID, lines, ev.PaymentDeadline, app.Operator)
		return classify(err)
	}
}

func onOrderRequest(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		var err error
		switch msg.Subject() {
		case events.SubjectOrderCancelRequested:
			var env events.Envelope
			var ev events.OrderCancelRequested
			if env, ev, err = events.Decode[events.OrderCancelRequested](msg.Data()); err == nil {
				_, err = svc.ReleaseLock(ctx, inbound(OrderRequests, env), ev.OrderID, stock.ChangeReleaseCancel, app.Operator)
			}
		case events.SubjectOrderRefundRequested:
			var env events.Envelope
			var ev events.OrderRefundRequested
			if env, ev, err = events.Decode[events.OrderRefundRequested](msg.Data()); err == nil {
				_, err = svc.RefundOrder(ctx, inbound(OrderRequests, env), ev.OrderID, app.Operator)
			}
		case events.SubjectOrderShipped:
			var env events.Envelope
			var ev events.OrderShipped
			if env, ev, err = events.Decode[events.OrderShipped](msg.Data()); err == nil {
				_, err = svc.ShipOrder(ctx, inbound(OrderRequests, env), ev.OrderID, app.Operator)
			}
		default:
			err = natsx.Permanent(fmt.Errorf("unexpected subject %s", msg.Subject()))
		}
		return classify(err)
	}
}

func onPaymentSucceeded(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		env, ev, err := events.Decode[events.PaymentSucceeded](msg.Data())
		if err != nil {
			return err
		}
		_, err = svc.SellLocked(ctx, inbound(PaymentSucceeded, env), ev.OrderID, ev.PaymentID, app.Operator)
		return classify(err)
	}
}

func onTimeoutExpired(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		env, ev, err := events.Decode[events.TimeoutExpired](msg.Data())
		if err != nil {
			return err
		}
		_, err = svc.ReleaseLock(ctx, inbound(TimeoutExpired, env), ev.OrderID, stock.ChangeReleaseTimeout, app.Operator)
		return classify(err)
	}
}
