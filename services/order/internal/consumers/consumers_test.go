package consumers_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/consumers"
	"github.com/stockflow/stockflow/services/order/internal/order"
	"github.com/stockflow/stockflow/services/order/internal/postgres"
)

type env struct {
	js   jetstream.JetStream
	svc  *app.Service
	pool *pgxpool.Pool
	// last is the highest stream sequence published per stream, to wait on.
	last map[string]uint64
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	pool, _ := pgtest.New(t, postgres.Schemas()...)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := postgres.New(pool)
	svc := app.New(store, store, log, app.Policy{PaymentWindow: 30 * time.Minute})
	_, err := svc.SetPrice(ctx, "CUP-1", 4900, "CNY", 0, "test")
	require.NoError(t, err)

	nc, err := nats.Connect(natstest.Start(t))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))
	for _, c := range consumers.All(svc) {
		stop, err := natsx.Consume(ctx, js, c.Spec, c.Handle, log)
		require.NoError(t, err)
		t.Cleanup(stop)
	}
	return &env{js: js, svc: svc, pool: pool, last: map[string]uint64{}}
}

func (e *env) placeOrder(t *testing.T) string {
	t.Helper()
	o, _, err := e.svc.PlaceOrder(context.Background(), app.PlaceOrderRequest{
		IdempotencyKey: t.Name(), BuyerID: "u1", Currency: "CNY",
		Items: []app.ItemRequest{{SKU: "CUP-1", Qty: 2}},
	})
	require.NoError(t, err)
	return o.ID()
}

// publish sends ev as a new event and returns its envelope id.
func (e *env) publish(t *testing.T, ev events.Event) string {
	t.Helper()
	m, err := events.Encode(ev, time.Now())
	require.NoError(t, err)
	e.publishRaw(t, ev.Subject(), m.Data, m.ID)
	return m.ID
}

// publishRaw sends body on subject with Nats-Msg-Id msgID.
func (e *env) publishRaw(t *testing.T, subject string, body []byte, msgID string) {
	t.Helper()
	ack, err := e.js.Publish(context.Background(), subject, body, jetstream.WithMsgID(msgID))
	require.NoError(t, err)
	e.last[ack.Stream] = max(e.last[ack.Stream], ack.Sequence)
}

// settle waits until every published message was acked or terminated by the consumers.
func (e *env) settle(t *testing.T) {
	t.Helper()
	durables := map[string]string{natsx.StreamStock: consumers.StockOutcomes, natsx.StreamPayment: consumers.PaymentOutcomes}
	for stream, seq := range e.last {
		require.Eventually(t, func() bool {
			c, err := e.js.Consumer(context.Background(), stream, durables[stream])
			require.NoError(t, err)
			info, err := c.Info(context.Background())
			require.NoError(t, err)
			return info.AckFloor.Stream >= seq && info.NumAckPending == 0
		}, 10*time.Second, 10*time.Millisecond, "consumer on %s never settled at %d", stream, seq)
	}
}

func (e *env) order(t *testing.T, id string) *order.Order {
	t.Helper()
	o, err := e.svc.Get(context.Background(), id)
	require.NoError(t, err)
	return o
}

func statuses(o *order.Order) []string {
	var out []string
	for _, h := range o.History() {
		out = append(out, h.Status.String())
	}
	return out
}

func (e *env) deadLetters(t *testing.T) uint64 {
	t.Helper()
	s, err := e.js.Stream(context.Background(), natsx.StreamDeadLetter)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

func TestOrderFollowsOutcomes(t *testing.T) {
	type step func(id string) events.Event
	var (
		locked = func(id string) events.Event {
			return events.StockLocked{OrderID: id, Lines: []events.Line{{SKU: "CUP-1", Qty: 2}}, PaymentDeadline: time.Now()}
		}
		rejected = func(id string) events.Event {
			return events.StockLockRejected{OrderID: id, Reason: "insufficient_stock", SKU: "CUP-1"}
		}
		sold   = func(id string) events.Event { return events.StockSold{OrderID: id} }
		resold = func(id string) events.Event { return events.StockSold{OrderID: id, Relocked: true} }
		failed = func(id string) events.Event {
			return events.StockSellFailed{OrderID: id, PaymentID: "p1", Reason: "stock gone"}
		}
		timeout = func(id string) events.Event { return events.StockReleased{OrderID: id, Reason: events.ReleaseTimeout} }
		cancel  = func(id string) events.Event { return events.StockReleased{OrderID: id, Reason: events.ReleaseCancel} }
		shipped = func(id string) events.Event { return events.StockShipped{OrderID: id} }
		restock = func(id string) events.Event { return events.StockRestocked{OrderID: id} }
		payFail = func(id string) events.Event {
			return events.PaymentFailed{OrderID: id, PaymentID: "p0", Reason: "declined"}
		}
		refunded = func(id string) events.Event {
			return events.PaymentRefunded{OrderID: id, PaymentID: "p1", Amount: 9800}
		}
	)
	tests := []struct {
		name  string
		steps []step   // processed in this order
		want  []string // the statuses of the history, oldest first
	}{
		{"locked then sold is paid", []step{locked, sold}, []string{"pending", "awaiting_payment", "paid"}},
		{"lock rejected", []step{rejected}, []string{"pending", "rejected"}},
		{"payment deadline passed", []step{locked, timeout}, []string{"pending", "awaiting_payment", "closed"}},
		{"cancel released", []step{locked, cancel}, []string{"pending", "awaiting_payment", "cancelled"}},
		{"sold before locked: paid, and the stale lock is ignored", []step{sold, locked}, []string{"pending", "paid"}},
		{"release after the sale is ignored", []step{locked, sold, timeout}, []string{"pending", "awaiting_payment", "paid"}},
		{"late payment re-sold after timeout", []step{locked, timeout, resold}, []string{"pending", "awaiting_payment", "closed", "paid"}},
		{"late payment that cannot be fulfilled is refunded", []step{locked, timeout, failed, refunded},
			[]string{"pending", "awaiting_payment", "closed", "refund_pending", "refunded"}},
		{"refund overtaking the sell failure completes the order", []step{locked, timeout, refunded, failed},
			[]string{"pending", "awaiting_payment", "closed", "refunded", "refunded"}},
		{"refund of an extra payment keeps a paid order paid", []step{locked, sold, refunded},
			[]string{"pending", "awaiting_payment", "paid", "paid"}},
		{"notes keep the status", []step{locked, payFail, sold, shipped, restock},
			[]string{"pending", "awaiting_payment", "awaiting_payment", "paid", "paid", "paid"}},
	}
	e := setup(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := e.placeOrder(t)
			// Each step settles before the next: the steps are the order of processing, which
			// across two streams (STOCK, PAYMENT) nothing else would fix.
			for _, s := range tc.steps {
				e.publish(t, s(id))
				e.settle(t)
			}
			assert.Equal(t, tc.want, statuses(e.order(t, id)))
		})
	}
	assert.Zero(t, e.deadLetters(t), "no valid outcome is dead-lettered")
}

func TestRedeliveredMessageChangesNothing(t *testing.T) {
	e := setup(t)
	id := e.placeOrder(t)
	m, err := events.Encode(events.StockLocked{OrderID: id, Lines: []events.Line{{SKU: "CUP-1", Qty: 2}}, PaymentDeadline: time.Now()}, time.Now())
	require.NoError(t, err)
	e.publishRaw(t, m.Subject, m.Data, m.ID)
	e.settle(t)
	before := e.order(t, id).Snapshot()

	// The same event again, past JetStream's duplicate window (another Nats-Msg-Id), as after
	// a relay replay: the inbox recognises the event id.
	e.publishRaw(t, m.Subject, m.Data, m.ID+"-replayed")
	e.settle(t)
	assert.Equal(t, before, e.order(t, id).Snapshot())

	var claims int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM inbox WHERE consumer = $1 AND message_id = $2`, consumers.StockOutcomes, m.ID).Scan(&claims))
	assert.Equal(t, 1, claims)

	// Two events with their own ids reporting the same fact: the second is a no-op too.
	e.publish(t, events.StockLocked{OrderID: id, Lines: []events.Line{{SKU: "CUP-1", Qty: 2}}, PaymentDeadline: time.Now()})
	e.settle(t)
	assert.Equal(t, before, e.order(t, id).Snapshot())
}

func TestUnknownOrderIsAcknowledged(t *testing.T) {
	e := setup(t)
	e.publish(t, events.StockLocked{OrderID: "no-such-order", Lines: []events.Line{{SKU: "CUP-1", Qty: 1}}, PaymentDeadline: time.Now()})
	e.publish(t, events.PaymentFailed{OrderID: "no-such-order", PaymentID: "p1", Reason: "declined"})
	e.settle(t)
	assert.Zero(t, e.deadLetters(t))
}

func TestPoisonIsDeadLettered(t *testing.T) {
	e := setup(t)
	id := e.placeOrder(t)
	e.publishRaw(t, events.SubjectStockLocked, []byte(`{not json`), "bad-1")
	e.publish(t, events.StockReleased{OrderID: id, Reason: "evaporated"})
	e.settle(t)
	assert.Equal(t, uint64(2), e.deadLetters(t))
	assert.Equal(t, order.Pending, e.order(t, id).Status())
}
