// Package consumers names the stock service's durable consumers and the use case each runs:
// natsx.On and natsx.Switch decode the event, call the app with the message's inbox identity
// and mark the error as errs declares, and natsx.Consume maps it to the ack (nil → Ack,
// permanent or malformed → dead letter and Term, a timeout not yet due → Nak until its
// deadline, anything else → Nak with backoff). Nothing else.
package consumers

import (
	"context"
	"errors"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
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

// errs: an order stock has not seen yet may arrive later (retry, even when the error says
// there is no lock too); any other domain refusal will never succeed (terminate, visible as a
// dead letter).
var errs = natsx.Errors{
	Retry:     []error{stock.ErrOrderUnknown},
	Permanent: []error{stock.ErrLockNotHeld, stock.ErrBadOrder, stock.ErrBadQuantity, stock.ErrBadSKU},
}

// OrderCreatedPartition is the durable consumer of partition p of order.created
// (natsx.OrderCreatedPartitions): every replica runs it, one at a time receives its messages.
// All of them share OrderCreated's inbox rows.
func OrderCreatedPartition(p int) string { return natsx.PartitionDurable(OrderCreated, p) }

// All returns the stock service's consumers.
func All(svc *app.Service) []service.Consumer {
	lockForOrder := natsx.On(OrderCreated, errs, func(ctx context.Context, in inbox.Message, ev events.OrderCreated) error {
		_, err := svc.LockForOrder(ctx, &in, ev.OrderID, ev.Lines(), ev.PaymentDeadline, app.Operator)
		return err
	})
	all := []service.Consumer{
		// order.created of older producers (no key) and of a stream without the partition
		// mapping (order.created.<key>); the partitions are appended below.
		{Spec: combined(spec(natsx.StreamOrder, OrderCreated, events.SubjectOrderCreated, events.SubjectOrderCreated+".*")),
			Handle: lockForOrder},
		{Spec: spec(natsx.StreamOrder, OrderRequests, events.SubjectOrderCancelRequested, events.SubjectOrderRefundRequested, events.SubjectOrderShipped),
			Handle: natsx.Switch(OrderRequests, errs,
				natsx.Case(func(ctx context.Context, in inbox.Message, ev events.OrderCancelRequested) error {
					_, err := svc.ReleaseLock(ctx, &in, ev.OrderID, stock.ChangeReleaseCancel, app.Operator)
					return err
				}),
				natsx.Case(func(ctx context.Context, in inbox.Message, ev events.OrderRefundRequested) error {
					_, err := svc.RefundOrder(ctx, &in, ev.OrderID, app.Operator)
					return err
				}),
				natsx.Case(func(ctx context.Context, in inbox.Message, ev events.OrderShipped) error {
					_, err := svc.ShipOrder(ctx, &in, ev.OrderID, app.Operator)
					return err
				}),
			)},
		{Spec: combined(spec(natsx.StreamPayment, PaymentSucceeded, events.SubjectPaymentSucceeded)),
			Handle: natsx.On(PaymentSucceeded, errs, func(ctx context.Context, in inbox.Message, ev events.PaymentSucceeded) error {
				_, err := svc.SellLocked(ctx, &in, ev.OrderID, ev.PaymentID, app.Operator)
				return err
			})},
		{Spec: combined(spec(natsx.StreamTimeout, TimeoutExpired, events.SubjectTimeoutExpired)),
			Handle: natsx.On(TimeoutExpired, errs, func(ctx context.Context, in inbox.Message, ev events.TimeoutExpired) error {
				_, err := svc.ReleaseLock(ctx, &in, ev.OrderID, stock.ChangeReleaseTimeout, app.Operator)
				return early(err)
			})},
	}
	for p := range natsx.OrderCreatedPartitions {
		s := combined(spec(natsx.StreamOrder, OrderCreatedPartition(p), natsx.OrderCreatedPartition(p)))
		s.PriorityGroup = "stock"
		all = append(all, service.Consumer{Spec: s, Handle: lockForOrder})
	}
	return all
}

// early asks for a timeout that came before the lock's deadline on stock's clock (the timeout
// service's clock runs ahead) to be redelivered when it is due, rather than on the backoff
// schedule that would dead-letter it within minutes.
func early(err error) error {
	var notDue *stock.NotYetDueError
	if errors.As(err, &notDue) {
		return natsx.RetryAfter(err, notDue.Wait)
	}
	return err
}

func spec(stream, durable string, subjects ...string) natsx.ConsumerSpec {
	return natsx.ConsumerSpec{Stream: stream, Durable: durable, FilterSubjects: subjects}
}

// combinedWorkers is how many messages a consumer whose use case is combined handles at once.
// Its handlers wait in the service's batcher without holding a database connection, so a
// fetched batch of messages is locked (or sold, or released) in one or two transactions. It is
// twice the batcher's default batch (STOCK_COMBINE_MAX_BATCH, 128): while one batch commits,
// its handlers are busy, and the other half gather the next one. With 128 a hot SKU's batches
// stopped at 64 (BenchmarkOrderCreatedReplicas).
const combinedWorkers = 256

func combined(s natsx.ConsumerSpec) natsx.ConsumerSpec { return s.Combined(combinedWorkers / 2) }
