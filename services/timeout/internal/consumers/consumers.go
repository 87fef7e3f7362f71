// Package consumers names the timeout service's durable consumers and the use case each runs:
// natsx.On and natsx.Switch decode the event, call the app with the message's inbox identity
// and mark the error as errs declares, and natsx.Consume maps it to the ack (nil → Ack,
// permanent or malformed → dead letter and Term, anything else → Nak with backoff). Nothing
// else.
package consumers

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
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

// errs: an order id that cannot be a deadline never will be (terminate); anything else — a
// database blip, a fire before its deadline — is retried.
var errs = natsx.Errors{Permanent: []error{deadline.ErrBadOrderID}}

// All returns the timeout service's consumers:
//
//	timeout-stock-locked    STOCK      stock.locked                schedule the deadline
//	timeout-fire            SCHEDULES  timeout.fire.>              expire it when it fires
//	timeout-stock-resolved  STOCK      stock.sold, stock.released  cancel it
//
// Each is natsx.ConsumerSpec.Combined for TIMEOUT_COMBINE_MAX_BATCH (maxBatch): the service
// combines all three.
func All(svc *app.Service, maxBatch int) []service.Consumer {
	return []service.Consumer{
		{Spec: natsx.ConsumerSpec{Stream: natsx.StreamStock, Durable: StockLocked, FilterSubjects: []string{events.SubjectStockLocked}}.Combined(maxBatch),
			Handle: natsx.On(StockLocked, errs, svc.ScheduleDeadline)},
		{Spec: natsx.ConsumerSpec{Stream: natsx.StreamSchedules, Durable: Fire, FilterSubjects: []string{natsx.SubjectsFire}}.Combined(maxBatch),
			Handle: natsx.OnMessage(Fire, errs, func(ctx context.Context, msg jetstream.Msg) error {
				orderID, err := app.DecodeFired(msg.Subject(), msg.Data())
				if err != nil {
					return err
				}
				return notDueLater(svc.Fire(ctx, orderID))
			})},
		{Spec: natsx.ConsumerSpec{Stream: natsx.StreamStock, Durable: StockResolved, FilterSubjects: []string{events.SubjectStockSold, events.SubjectStockReleased}}.Combined(maxBatch),
			Handle: natsx.Switch(StockResolved, errs,
				natsx.Case(func(ctx context.Context, in inbox.Message, ev events.StockSold) error {
					return svc.Resolve(ctx, in, ev.OrderID, deadline.ResolutionSold)
				}),
				natsx.Case(func(ctx context.Context, in inbox.Message, ev events.StockReleased) error {
					return svc.Resolve(ctx, in, ev.OrderID, deadline.ResolutionReleased)
				}),
			)},
	}
}

// notDueLater makes a fire that came before its deadline (the NATS server's clock ahead of
// ours, or ours stepped back) come again when it is due by our clock, rather than on the
// usual backoff that would dead-letter it after a few minutes.
func notDueLater(err error) error {
	var early *deadline.NotDueError
	if errors.As(err, &early) {
		return natsx.RetryAfter(err, early.Wait)
	}
	return err
}
