// Package consumers turns the messages the timeout service listens to into use cases:
// decode, call the app, and return an error that natsx maps to the ack (nil → Ack,
// natsx.Permanent or a malformed event → Term and dead letter, anything else → Nak with
// backoff). Nothing else.
package consumers

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/timeout/internal/app"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

// Durable consumer names; each is also the consumer name of its inbox rows.
const (
	StockLocked   = "timeout-stock-locked"
	Fire          = "timeout-fire"
	StockResolved = "timeout-stock-resolved"
)

// All returns the timeout service's consumers:
//
//	timeout-stock-locked    STOCK      stock.locked                schedule the deadline
//	timeout-fire            SCHEDULES  timeout.fire.>              expire it when it fires
//	timeout-stock-resolved  STOCK      stock.sold, stock.released  cancel it
func All(svc *app.Service) []service.Consumer {
	return []service.Consumer{
		{Spec: natsx.ConsumerSpec{Stream: natsx.StreamStock, Durable: StockLocked, FilterSubjects: []string{events.SubjectStockLocked}},
			Handle: onStockLocked(svc)},
		{Spec: natsx.ConsumerSpec{Stream: natsx.StreamSchedules, Durable: Fire, FilterSubjects: []string{natsx.SubjectsFire}},
			Handle: onFire(svc)},
		{Spec: natsx.ConsumerSpec{Stream: natsx.StreamStock, Durable: StockResolved, FilterSubjects: []string{events.SubjectStockSold, events.SubjectStockReleased}},
			Handle: onStockResolved(svc)},
	}
}

func onStockLocked(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		env, ev, err := events.Decode[events.StockLocked](msg.Data())
		if err != nil {
			return fmt.Errorf("%s: %w", StockLocked, err)
		}
		return classify(svc.ScheduleDeadline(ctx, app.Inbound{Consumer: StockLocked, MessageID: env.ID}, ev))
	}
}

func onFire(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		orderID, err := app.DecodeFired(msg.Subject(), msg.Data())
		if err != nil {
			return fmt.Errorf("%s: %w", Fire, err)
		}
		return classify(svc.Fire(ctx, orderID))
	}
}

func onStockResolved(svc *app.Service) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		var (
			env        events.Envelope
			orderID    string
			resolution string
			err        error
		)
		switch msg.Subject() {
		case events.SubjectStockSold:
			var ev events.StockSold
			env, ev, err = events.Decode[events.StockSold](msg.Data())
			orderID, resolution = ev.OrderID, deadline.ResolutionSold
		case events.SubjectStockReleased:
			var ev events.StockReleased
			env, ev, err = events.Decode[events.StockReleased](msg.Data())
			orderID, resolution = ev.OrderID, deadline.ResolutionReleased
		default:
			return natsx.Permanent(fmt.Errorf("%s: unexpected subject %s", StockResolved, msg.Subject()))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", StockResolved, err)
		}
		return classify(svc.Resolve(ctx, app.Inbound{Consumer: StockResolved, MessageID: env.ID}, orderID, resolution))
	}
}

// classify: an order id that cannot be a deadline never will be (terminate); anything else
// — a database blip, a fire before its deadline — is retried.
func classify(err error) error {
	if errors.Is(err, deadline.ErrBadOrderID) {
		return natsx.Permanent(err)
	}
	return err
}
