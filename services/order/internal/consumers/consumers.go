// Package consumers names the order service's durable consumers and turns each outcome it
// listens to into an order transition: natsx.Switch decodes the event, the case hands the
// transition to app.Follow with the message's inbox identity, and natsx.Consume maps the error
// to the ack (nil → Ack, permanent or malformed → dead letter and Term, anything else → Nak
// with backoff). Nothing else.
//
// There is one durable consumer per stream, not per event: a single consumer is delivered an
// order's stock outcomes in the order stock published them (locked before sold before
// restocked). Its workers handle many at once, though, so an order's outcomes may be
// processed out of order, and retried messages come back later still: the domain decides
// every out-of-order and duplicate case explicitly (see package order), and the inbox absorbs
// redeliveries.
package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// Durable consumer names; each is also the consumer name of its inbox rows.
const (
	StockOutcomes   = "order-stock-outcomes"
	PaymentOutcomes = "order-payment-outcomes"
	// GateReturns keeps the flash-sale gate in step with stock: it gives back the units of
	// orders stock did not keep, and counts the locks of orders that went past the gate.
	GateReturns = "order-gate-returns"
)

// StockSubjects and PaymentSubjects are the subjects each consumer takes.
var (
	StockSubjects = []string{
		events.SubjectStockLocked, events.SubjectStockLockRejected, events.SubjectStockSold,
		events.SubjectStockSellFailed, events.SubjectStockReleased, events.SubjectStockRestocked,
		events.SubjectStockShipped,
	}
	PaymentSubjects = []string{events.SubjectPaymentFailed, events.SubjectPaymentRefunded, events.SubjectPaymentNothingToRefund}
	// GateSubjects are the outcomes after which an order no longer holds what the gate gave
	// it — the lock was rejected, released (timeout, cancel), or its sold units restocked —
	// and the lock, which holds units the gate may not have given (a bypassed Take).
	GateSubjects = []string{events.SubjectStockLocked, events.SubjectStockLockRejected, events.SubjectStockReleased, events.SubjectStockRestocked}
)

// workers is how many outcomes each consumer handles at once. With the repository combined
// (ORDER_COMBINE_MAX_BATCH > 1) they wait for their batch without holding a connection, and a
// fetched batch of outcomes commits in one transaction. Outcomes of one order may be handled
// out of order; the order's transitions decide (an outcome that is not a transition from the
// order's status is ignored and logged).
const workers = 64

// All returns the order service's consumers. Follow answers nil for every outcome retrying
// cannot change, so no domain error is declared: what fails is the database, and is retried.
func All(svc *app.Service) []service.Consumer {
	spec := func(stream, durable string, subjects []string) natsx.ConsumerSpec {
		return natsx.ConsumerSpec{Stream: stream, Durable: durable, FilterSubjects: subjects, Workers: workers, MaxAckPending: 4 * workers}
	}
	cs := []service.Consumer{
		{Spec: spec(natsx.StreamStock, StockOutcomes, StockSubjects), Handle: natsx.Switch(StockOutcomes, natsx.Errors{},
			follow(svc, func(ev events.StockLocked) (string, app.Apply, error) {
				return ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.StockLocked(at) }, nil
			}),
			follow(svc, func(ev events.StockLockRejected) (string, app.Apply, error) {
				reason := ev.Reason
				if ev.SKU != "" {
					reason += " (" + ev.SKU + ")"
				}
				return ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.StockLockRejected(at, reason) }, nil
			}),
			follow(svc, func(ev events.StockSold) (string, app.Apply, error) {
				return ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.StockSold(at, ev.Relocked) }, nil
			}),
			follow(svc, func(ev events.StockSellFailed) (string, app.Apply, error) {
				return ev.OrderID, func(o *order.Order, at time.Time) (bool, error) {
					return o.StockSellFailed(at, ev.PaymentID, ev.Reason)
				}, nil
			}),
			follow(svc, func(ev events.StockReleased) (string, app.Apply, error) {
				why, err := order.ParseReleaseReason(ev.Reason)
				if err != nil {
					return "", nil, natsx.Permanent(fmt.Errorf("stock.released of order %s: %w", ev.OrderID, err))
				}
				return ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.StockReleased(at, why) }, nil
			}),
			follow(svc, func(ev events.StockRestocked) (string, app.Apply, error) {
				return ev.OrderID, note("stock restocked"), nil
			}),
			follow(svc, func(ev events.StockShipped) (string, app.Apply, error) {
				return ev.OrderID, note("stock shipped: units left the warehouse"), nil
			}),
		)},
		{Spec: spec(natsx.StreamPayment, PaymentOutcomes, PaymentSubjects), Handle: natsx.Switch(PaymentOutcomes, natsx.Errors{},
			follow(svc, func(ev events.PaymentFailed) (string, app.Apply, error) {
				return ev.OrderID, note(fmt.Sprintf("payment %s failed: %s", ev.PaymentID, ev.Reason)), nil
			}),
			follow(svc, func(ev events.PaymentRefunded) (string, app.Apply, error) {
				return ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.PaymentRefunded(at, ev.PaymentID) }, nil
			}),
			follow(svc, func(ev events.PaymentNothingToRefund) (string, app.Apply, error) {
				return ev.OrderID, (*order.Order).NothingToRefund, nil
			}),
		)},
	}
	if svc.HasGate() {
		cs = append(cs, gateReturns(svc))
	}
	return cs
}

// gateReturns is the consumer that gives the gate back the units of orders whose lock stock
// rejected, released or restocked, and counts against it the locks of orders Redis did not
// answer for. The gate counts each order once, so it needs no inbox; a Redis that does not
// answer is retried with backoff like any transient failure. A lock handled after its own
// release (the workers run out of order) leaves the gate one order low, until stock's gate
// job sees the database has the units back and gives them back.
func gateReturns(svc *app.Service) service.Consumer {
	giveBack := func(ctx context.Context, orderID string) error { return svc.GiveBack(ctx, orderID) }
	return service.Consumer{
		Spec: natsx.ConsumerSpec{Stream: natsx.StreamStock, Durable: GateReturns, FilterSubjects: GateSubjects, Workers: 8, MaxAckPending: 256},
		Handle: natsx.Switch(GateReturns, natsx.Errors{},
			natsx.Case(func(ctx context.Context, _ inbox.Message, ev events.StockLocked) error {
				lines := make([]gate.Line, len(ev.Lines))
				for i, l := range ev.Lines {
					lines[i] = gate.Line{SKU: l.SKU, Qty: l.Qty}
				}
				return svc.TakeLocked(ctx, ev.OrderID, lines)
			}),
			natsx.Case(func(ctx context.Context, _ inbox.Message, ev events.StockLockRejected) error {
				return giveBack(ctx, ev.OrderID)
			}),
			natsx.Case(func(ctx context.Context, _ inbox.Message, ev events.StockReleased) error {
				return giveBack(ctx, ev.OrderID)
			}),
			natsx.Case(func(ctx context.Context, _ inbox.Message, ev events.StockRestocked) error {
				return giveBack(ctx, ev.OrderID)
			}),
		),
	}
}

// follow is the case of the outcomes E: transition says which order an outcome is about and
// what it does to it (an error: the outcome is unusable), and app.Follow applies that.
func follow[E events.Payload](svc *app.Service, transition func(E) (orderID string, apply app.Apply, err error)) natsx.Branch {
	return natsx.Case(func(ctx context.Context, in inbox.Message, ev E) error {
		orderID, apply, err := transition(ev)
		if err != nil {
			return err
		}
		_, err = svc.Follow(ctx, in, orderID, ev.Subject(), apply)
		return err
	})
}

func note(reason string) app.Apply {
	return func(o *order.Order, at time.Time) (bool, error) {
		o.Note(at, reason)
		return true, nil
	}
}
