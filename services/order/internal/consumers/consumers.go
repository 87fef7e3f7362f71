// Package consumers turns the outcomes the order service listens to into order transitions:
// decode, hand the transition to app.Follow, and return an error that natsx maps to the ack
// (nil → Ack, natsx.Permanent or a malformed event → Term and dead letter, anything else →
// Nak with backoff). Nothing else.
//
// There is one durable consumer per stream, not per event: a single consumer sees an order's
// stock outcomes in the order stock published them (locked before sold before restocked), so
// out-of-order arrival is the exception — after a retried message — rather than the rule.
// The domain still decides every out-of-order and duplicate case explicitly (see package
// order), and the inbox absorbs redeliveries.
package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// Durable consumer names; each is also the consumer name of its inbox rows.
const (
	StockOutcomes   = "order-stock-outcomes"
	PaymentOutcomes = "order-payment-outcomes"
)

// StockSubjects and PaymentSubjects are the subjects each consumer takes.
var (
	StockSubjects = []string{
		events.SubjectStockLocked, events.SubjectStockLockRejected, events.SubjectStockSold,
		events.SubjectStockSellFailed, events.SubjectStockReleased, events.SubjectStockRestocked,
		events.SubjectStockShipped,
	}
	PaymentSubjects = []string{events.SubjectPaymentFailed, events.SubjectPaymentRefunded}
)

// workers is how many outcomes each consumer handles at once. With the repository combined
// (ORDER_COMBINE_MAX_BATCH > 1) they wait for their batch without holding a connection, and a
// fetched batch of outcomes commits in one transaction. Outcomes of one order may be handled
// out of order; the order's transitions decide (an outcome that is not a transition from the
// order's status is ignored and logged).
const workers = 64

// All returns the order service's consumers.
func All(svc *app.Service) []service.Consumer {
	return []service.Consumer{
		{Spec: natsx.ConsumerSpec{Stream: natsx.StreamStock, Durable: StockOutcomes, FilterSubjects: StockSubjects, Workers: workers, MaxAckPending: 4 * workers},
			Handle: handler(svc, StockOutcomes, decodeStock)},
		{Spec: natsx.ConsumerSpec{Stream: natsx.StreamPayment, Durable: PaymentOutcomes, FilterSubjects: PaymentSubjects, Workers: workers, MaxAckPending: 4 * workers},
			Handle: handler(svc, PaymentOutcomes, decodePayment)},
	}
}

// outcome is a decoded message: its envelope, the order it is about and the transition.
type outcome struct {
	env     events.Envelope
	orderID string
	apply   app.Apply
}

func handler(svc *app.Service, durable string, decode func(subject string, body []byte) (outcome, error)) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		oc, err := decode(msg.Subject(), msg.Data())
		if err != nil {
			return fmt.Errorf("%s: %w", durable, err)
		}
		_, err = svc.Follow(ctx, app.Inbound{Consumer: durable, MessageID: oc.env.ID}, oc.orderID, msg.Subject(), oc.apply)
		return err
	}
}

func note(reason string) app.Apply {
	return func(o *order.Order, at time.Time) (bool, error) {
		o.Note(at, reason)
		return true, nil
	}
}

func decodeStock(subject string, body []byte) (outcome, error) {
	switch subject {
	case events.SubjectStockLocked:
		env, ev, err := events.Decode[events.StockLocked](body)
		return outcome{env, ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.StockLocked(at) }}, err
	case events.SubjectStockLockRejected:
		env, ev, err := events.Decode[events.StockLockRejected](body)
		reason := ev.Reason
		if ev.SKU != "" {
			reason += " (" + ev.SKU + ")"
		}
		return outcome{env, ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.StockLockRejected(at, reason) }}, err
	case events.SubjectStockSold:
		env, ev, err := events.Decode[events.StockSold](body)
		return outcome{env, ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.StockSold(at, ev.Relocked) }}, err
	case events.SubjectStockSellFailed:
		env, ev, err := events.Decode[events.StockSellFailed](body)
		return outcome{env, ev.OrderID, func(o *order.Order, at time.Time) (bool, error) {
			return o.StockSellFailed(at, ev.PaymentID, ev.Reason)
		}}, err
	case events.SubjectStockReleased:
		env, ev, err := events.Decode[events.StockReleased](body)
		if err != nil {
			return outcome{}, err
		}
		why, err := order.ParseReleaseReason(ev.Reason)
		if err != nil {
			return outcome{}, natsx.Permanent(fmt.Errorf("stock.released %s: %w", env.ID, err))
		}
		return outcome{env, ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.StockReleased(at, why) }}, nil
	case events.SubjectStockRestocked:
		env, ev, err := events.Decode[events.StockRestocked](body)
		return outcome{env, ev.OrderID, note("stock restocked")}, err
	case events.SubjectStockShipped:
		env, ev, err := events.Decode[events.StockShipped](body)
		return outcome{env, ev.OrderID, note("stock shipped: units left the warehouse")}, err
	}
	return outcome{}, natsx.Permanent(fmt.Errorf("unexpected subject %s", subject))
}

func decodePayment(subject string, body []byte) (outcome, error) {
	switch subject {
	case events.SubjectPaymentFailed:
		env, ev, err := events.Decode[events.PaymentFailed](body)
		return outcome{env, ev.OrderID, note(fmt.Sprintf("payment %s failed: %s", ev.PaymentID, ev.Reason))}, err
	case events.SubjectPaymentRefunded:
		env, ev, err := events.Decode[events.PaymentRefunded](body)
		return outcome{env, ev.OrderID, func(o *order.Order, at time.Time) (bool, error) { return o.PaymentRefunded(at, ev.PaymentID) }}, err
	}
	return outcome{}, natsx.Permanent(fmt.Errorf("unexpected subject %s", subject))
}
