package consumers_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/consumers"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

type rig struct {
	t    *testing.T
	svc  *app.Service
	js   jetstream.JetStream
	pool *pgxpool.Pool
}

// newRig runs the stock consumers and the outbox relay against a real database and a real
// embedded NATS server. wrap may decorate each handler (to simulate a crash before the ack).
func newRig(t *testing.T, wrap func(natsx.Handler) natsx.Handler) *rig {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), "stock-test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))
	svc := app.New(postgres.NewStore(pool))
	log := slog.New(slog.DiscardHandler)
	for _, c := range consumers.All(svc) {
		h := c.Handle
		if wrap != nil {
			h = wrap(h)
		}
		stop, err := natsx.Consume(ctx, js, c.Spec, h, log)
		require.NoError(t, err)
		t.Cleanup(stop)
	}
	relay := outbox.NewRelay(pool, js, outbox.RelayOptions{Logger: log})
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-relayDone, "the relay")
	})
	return &rig{t: t, svc: svc, js: js, pool: pool}
}

func (r *rig) publish(ev events.Event) events.Message {
	msg, err := events.Encode(ev, time.Now())
	require.NoError(r.t, err)
	r.publishMsg(msg, msg.ID)
	return msg
}

func (r *rig) publishMsg(msg events.Message, natsID string) {
	_, err := r.js.Publish(context.Background(), msg.Subject, msg.Data, jetstream.WithMsgID(natsID))
	require.NoError(r.t, err)
}

// outcomes reads every event the stock service published on a subject.
func (r *rig) outcomes(subject string) []events.Envelope {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := r.js.OrderedConsumer(ctx, natsx.StreamStock, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	require.NoError(r.t, err)
	var out []events.Envelope
	for {
		batch, err := c.FetchNoWait(100)
		require.NoError(r.t, err)
		n := 0
		for m := range batch.Messages() {
			env, err := events.Open(m.Data())
			require.NoError(r.t, err)
			out = append(out, env)
			n++
		}
		if n == 0 {
			return out
		}
	}
}

// count is the answer of a count(*) query.
func (r *rig) count(query string, args ...any) int {
	var n int
	require.NoError(r.t, r.pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func (r *rig) quantities(sku string) stock.Quantities {
	s, err := r.svc.GetSKU(context.Background(), sku)
	require.NoError(r.t, err)
	return s.Quantities
}

func orderCreated(id, sku string, qty int64) events.OrderCreated {
	return events.OrderCreated{OrderID: id, BuyerID: "u1", Currency: "CNY", Total: 100 * qty,
		Items: []events.OrderItem{{SKU: sku, Qty: qty, UnitPrice: 100}}, PaymentDeadline: time.Now().Add(time.Hour)}
}

func TestOrderFlowThroughTheConsumers(t *testing.T) {
	r := newRig(t, nil)
	_, err := r.svc.CreateSKU(context.Background(), "CUP-1", 5, "t")
	require.NoError(t, err)

	r.publish(orderCreated("paid", "CUP-1", 2))
	r.publish(orderCreated("too-big", "CUP-1", 9))
	unpaid := orderCreated("unpaid", "CUP-1", 1)
	unpaid.PaymentDeadline = time.Now() // due when its timeout comes
	r.publish(unpaid)
	r.publish(orderCreated("cancelled", "CUP-1", 1))
	r.publish(orderCreated("bad-sku", "has space", 1))
	r.publish(orderCreated("huge", "CUP-1", stock.MaxQty+1))
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockLocked)) == 3 }, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockLockRejected)) == 3 }, 5*time.Second, 50*time.Millisecond,
		"too-big, bad-sku and huge are rejected: an order stock cannot take still gets an answer")

	r.publish(events.PaymentSucceeded{PaymentID: "pay-1", OrderID: "paid", Provider: "sandbox", ProviderTxnID: "x", Amount: 200, Currency: "CNY"})
	r.publish(events.TimeoutExpired{OrderID: "unpaid", Deadline: time.Now()})
	r.publish(events.OrderCancelRequested{OrderID: "cancelled"})
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockReleased)) == 2 }, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockSold)) == 1 }, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, stock.Quantities{OnHand: 5, Sold: 2}, r.quantities("CUP-1"))

	// A payment for the rejected order cannot be sold: stock.sell_failed asks for a refund.
	r.publish(events.PaymentSucceeded{PaymentID: "pay-2", OrderID: "too-big", Provider: "sandbox", ProviderTxnID: "y", Amount: 900, Currency: "CNY"})
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockSellFailed)) == 1 }, 10*time.Second, 50*time.Millisecond)

	// Ship and refund a paid order.
	r.publish(events.OrderShipped{OrderID: "paid"})
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockShipped)) == 1 }, 10*time.Second, 50*time.Millisecond)
	r.publish(events.OrderRefundRequested{OrderID: "paid"})
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockRestocked)) == 1 }, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, stock.Quantities{OnHand: 5}, r.quantities("CUP-1"))
	diffs, err := r.svc.Verify(context.Background())
	require.NoError(t, err)
	assert.Empty(t, diffs)
}

// TestCrashBetweenCommitAndAckAppliesOnce: the handler's transaction commits, then the
// process "dies" before acking (the wrapper returns an error, so the message is redelivered).
// The redelivery finds the inbox row and changes nothing.
func TestCrashBetweenCommitAndAckAppliesOnce(t *testing.T) {
	var crashed atomic.Int32
	r := newRig(t, func(h natsx.Handler) natsx.Handler {
		return func(ctx context.Context, msg jetstream.Msg) error {
			if err := h(ctx, msg); err != nil {
				return err
			}
			if crashed.Add(1) <= 3 {
				return errors.New("simulated crash after commit, before ack")
			}
			return nil
		}
	})
	_, err := r.svc.CreateSKU(context.Background(), "CUP-1", 10, "t")
	require.NoError(t, err)
	r.publish(orderCreated("o1", "CUP-1", 3))
	require.Eventually(t, func() bool { return crashed.Load() >= 4 }, 10*time.Second, 20*time.Millisecond, "redelivered after each crash")
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockLocked)) == 1 }, 5*time.Second, 50*time.Millisecond)
	assert.Equal(t, stock.Quantities{OnHand: 10, Locked: 3}, r.quantities("CUP-1"))
	assert.Len(t, r.outcomes(events.SubjectStockLocked), 1, "one stock.locked, however often it was delivered")
}

// TestReplayedMessagesChangeNothing publishes the same envelope under fresh Nats-Msg-Ids, so
// JetStream dedup lets every copy through: the inbox absorbs them.
func TestReplayedMessagesChangeNothing(t *testing.T) {
	r := newRig(t, nil)
	_, err := r.svc.CreateSKU(context.Background(), "CUP-1", 10, "t")
	require.NoError(t, err)
	created := r.publish(orderCreated("o1", "CUP-1", 3))
	paid := r.publish(events.PaymentSucceeded{PaymentID: "pay-1", OrderID: "o1", Provider: "sandbox", ProviderTxnID: "x", Amount: 300, Currency: "CNY"})
	for _, id := range []string{"copy-1", "copy-2"} {
		r.publishMsg(created, id+created.ID)
		r.publishMsg(paid, id+paid.ID)
	}
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockSold)) == 1 }, 10*time.Second, 50*time.Millisecond)
	// Every copy has been handled and acknowledged: a handler's effects, outbox rows and inbox
	// claim commit before its ack, so what the database holds now is final.
	natstest.WaitSettled(t, r.js, natsx.StreamOrder, consumers.OrderCreated)
	natstest.WaitSettled(t, r.js, natsx.StreamPayment, consumers.PaymentSucceeded)
	for consumer, id := range map[string]string{consumers.OrderCreated: created.ID, consumers.PaymentSucceeded: paid.ID} {
		assert.Equal(t, 1, r.count(`SELECT count(*) FROM inbox WHERE consumer = $1`, consumer), consumer)
		assert.Equal(t, 1, r.count(`SELECT count(*) FROM inbox WHERE consumer = $1 AND message_id = $2`, consumer, id), consumer)
	}
	assert.Equal(t, 1, r.count(`SELECT count(*) FROM outbox WHERE subject = $1`, events.SubjectStockLocked))
	assert.Equal(t, 1, r.count(`SELECT count(*) FROM outbox WHERE subject = $1`, events.SubjectStockSold))
	assert.Equal(t, 2, r.count(`SELECT count(*) FROM outbox`), "nothing else was emitted")
	assert.Len(t, r.outcomes(events.SubjectStockLocked), 1)
	assert.Len(t, r.outcomes(events.SubjectStockSold), 1)
	assert.Equal(t, stock.Quantities{OnHand: 10, Sold: 3}, r.quantities("CUP-1"))
}

// TestPoisonMessageIsDeadLettered: a malformed body is terminated and visible in DEADLETTER,
// and it does not block the messages behind it.
func TestPoisonMessageIsDeadLettered(t *testing.T) {
	r := newRig(t, nil)
	_, err := r.svc.CreateSKU(context.Background(), "CUP-1", 10, "t")
	require.NoError(t, err)
	_, err = r.js.Publish(context.Background(), events.SubjectOrderCreated, []byte(`{"not":"an envelope"}`))
	require.NoError(t, err)
	r.publish(orderCreated("after-poison", "CUP-1", 1))
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockLocked)) == 1 }, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		info, err := r.js.Stream(context.Background(), natsx.StreamDeadLetter)
		if err != nil {
			return false
		}
		return info.CachedInfo().State.Msgs >= 1
	}, 10*time.Second, 50*time.Millisecond)
}

// TestEarlyTimeoutIsRedeliveredAtTheDeadline (F19): a timeout.expired that comes before the
// lock's deadline on stock's clock (the timeout service's clock runs ahead) releases nothing
// and is not marked processed; JetStream redelivers it at the deadline and it releases once.
func TestEarlyTimeoutIsRedeliveredAtTheDeadline(t *testing.T) {
	type delivery struct {
		at  time.Time
		err error
	}
	deliveries := make(chan delivery, 10)
	r := newRig(t, func(h natsx.Handler) natsx.Handler {
		return func(ctx context.Context, msg jetstream.Msg) error {
			err := h(ctx, msg)
			if msg.Subject() == events.SubjectTimeoutExpired {
				deliveries <- delivery{time.Now(), err}
			}
			return err
		}
	})
	ctx := context.Background()
	_, err := r.svc.CreateSKU(ctx, "CUP-1", 5, "t")
	require.NoError(t, err)
	deadline := time.Now().Add(2 * time.Second).UTC().Truncate(time.Microsecond)
	created := orderCreated("early", "CUP-1", 2)
	created.PaymentDeadline = deadline
	r.publish(created)
	require.Eventually(t, func() bool { return len(r.outcomes(events.SubjectStockLocked)) == 1 }, 10*time.Second, 50*time.Millisecond)

	r.publish(events.TimeoutExpired{OrderID: "early", Deadline: deadline})
	first := <-deliveries
	require.True(t, first.at.Before(deadline), "the test is too slow: the timeout came after its deadline")
	assert.ErrorIs(t, first.err, stock.ErrNotYetDue)
	assert.Equal(t, stock.Quantities{OnHand: 5, Locked: 2}, r.quantities("CUP-1"), "still held")
	assert.Zero(t, r.count(`SELECT count(*) FROM stock_ledger WHERE change_type = 'release_timeout'`))
	assert.Zero(t, r.count(`SELECT count(*) FROM inbox WHERE consumer = $1`, consumers.TimeoutExpired), "not marked processed")

	last, early := first, 1
	for last.err != nil {
		select {
		case last = <-deliveries:
		case <-time.After(10 * time.Second):
			t.Fatal("the early timeout was never redelivered")
		}
		if last.err != nil {
			early++
		}
	}
	assert.False(t, last.at.Before(deadline), "released before the deadline, at %s", last.at)
	assert.Equal(t, 1, early, "redelivered once, at the deadline, not on the backoff schedule")
	natstest.WaitSettled(t, r.js, natsx.StreamTimeout, consumers.TimeoutExpired)
	assert.Equal(t, stock.Quantities{OnHand: 5}, r.quantities("CUP-1"))
	assert.Equal(t, 1, r.count(`SELECT count(*) FROM stock_ledger WHERE change_type = 'release_timeout'`))
	assert.Equal(t, 1, r.count(`SELECT count(*) FROM outbox WHERE subject = $1`, events.SubjectStockReleased))
	assert.Empty(t, deliveries, "nothing delivered after the release")
}
