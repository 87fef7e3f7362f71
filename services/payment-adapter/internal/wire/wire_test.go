package wire_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/consumers"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/wire"
)

const secret = "wire-test-secret"

// system runs payment-adapter's parts as service.Main would: a migrated database, a real NATS
// server with every stream, the outbox relay, the consumers and the HTTP handler.
type system struct {
	t    *testing.T
	js   jetstream.JetStream
	pool *pgxpool.Pool
	url  string
}

func start(t *testing.T) *system {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool, _ := pgtest.New(t, wire.Schemas()...)
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))

	log := slog.New(slog.DiscardHandler)
	cfg, err := config.Load([]string{"PAYMENT_SANDBOX_SECRET=" + secret})
	require.NoError(t, err)
	parts, err := wire.Build(pool, log, cfg, pool.Ping, authtest.New(t).Verifier, http.DefaultClient)
	require.NoError(t, err)
	require.Empty(t, parts.Loops)

	relayDone := make(chan error, 1)
	go func() {
		relayDone <- outbox.NewRelay(pool, js, outbox.RelayOptions{PollInterval: 10 * time.Millisecond, Logger: log}).Run(ctx)
	}()
	var stops []func()
	for _, c := range parts.Consumers {
		stop, err := natsx.Consume(ctx, js, c.Spec, c.Handle, log)
		require.NoError(t, err)
		stops = append(stops, stop)
	}
	srv := httptest.NewServer(parts.Handler)
	t.Cleanup(func() {
		srv.Close()
		for _, s := range stops {
			s()
		}
		cancel()
		assert.NoError(t, <-relayDone)
	})
	return &system{t: t, js: js, pool: pool, url: srv.URL}
}

func (s *system) publish(ev events.Event) {
	s.t.Helper()
	m, err := events.Encode(ev, time.Now())
	require.NoError(s.t, err)
	_, err = s.js.Publish(context.Background(), m.Subject, m.Data, jetstream.WithMsgID(m.ID))
	require.NoError(s.t, err)
}

// settle waits until every consumer has handled every message published so far and the relay
// has published every outbox row they wrote.
func (s *system) settle() {
	s.t.Helper()
	natstest.WaitSettled(s.t, s.js, natsx.StreamOrder, consumers.OrderCreated, consumers.OrderRefundRequested)
	natstest.WaitSettled(s.t, s.js, natsx.StreamStock, consumers.StockSellFailed)
	natstest.WaitSettled(s.t, s.js, natsx.StreamPayment, consumers.RefundRequested)
	require.Eventually(s.t, func() bool {
		var pending int
		require.NoError(s.t, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_unpublished`).Scan(&pending))
		return pending == 0
	}, 10*time.Second, 10*time.Millisecond, "the relay published every outbox row")
}

func (s *system) pay(orderID, txn string, amount int64) int {
	s.t.Helper()
	body := fmt.Appendf(nil, `{"provider_txn_id":%q,"order_id":%q,"amount":%d,"currency":"CNY","status":"succeeded"}`, txn, orderID, amount)
	sb, err := sandbox.New(secret)
	require.NoError(s.t, err)
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/callbacks/sandbox", bytes.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set(sandbox.SignatureHeader, sb.Sign(body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	require.NoError(s.t, resp.Body.Close())
	return resp.StatusCode
}

// stream returns the messages stored in stream, oldest first.
func (s *system) stream(name string) []*jetstream.RawStreamMsg {
	s.t.Helper()
	ctx := context.Background()
	st, err := s.js.Stream(ctx, name)
	require.NoError(s.t, err)
	info, err := st.Info(ctx)
	require.NoError(s.t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		require.NoError(s.t, err)
		out = append(out, m)
	}
	return out
}

func (s *system) subjects(stream string) []string {
	var out []string
	for _, m := range s.stream(stream) {
		out = append(out, m.Subject)
	}
	return out
}

func TestPaymentAndRefundFlowOverNATS(t *testing.T) {
	s := start(t)
	s.publish(events.OrderCreated{
		OrderID: "ord-1", BuyerID: "u1", Items: []events.OrderItem{{SKU: "CUP-1", Qty: 2, UnitPrice: 4900}},
		Total: 9800, Currency: "CNY", PaymentDeadline: time.Now().Add(time.Hour),
	})
	// Until the consumer has stored the order's total the callback is 503; then 200.
	require.Eventually(t, func() bool { return s.pay("ord-1", "txn-1", 9800) == http.StatusOK }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusOK, s.pay("ord-1", "txn-1", 9800), "a duplicate is acknowledged")

	require.Eventually(t, func() bool { return len(s.stream(natsx.StreamPayment)) == 1 }, 10*time.Second, 20*time.Millisecond)
	first := s.stream(natsx.StreamPayment)[0]
	require.Equal(t, events.SubjectPaymentSucceeded, first.Subject)
	_, paid, err := events.Decode[events.PaymentSucceeded](first.Data)
	require.NoError(t, err)

	// The late payment could not be sold: refund it, once, however often stock says so; the
	// order's own refund request then finds nothing left to refund. The refund is recorded
	// (payment.refund_requested), and payment-adapter's own consumer of that asks the
	// provider and emits payment.refunded.
	s.publish(events.StockSellFailed{OrderID: "ord-1", PaymentID: paid.PaymentID, Reason: "insufficient_stock"})
	s.publish(events.StockSellFailed{OrderID: "ord-1", PaymentID: paid.PaymentID, Reason: "insufficient_stock"})
	s.publish(events.OrderRefundRequested{OrderID: "ord-1", Reason: "buyer"})
	require.Eventually(t, func() bool { return len(s.stream(natsx.StreamPayment)) == 3 }, 10*time.Second, 20*time.Millisecond)

	// A refund of a payment never issued is poison: dead-lettered, never retried forever.
	s.publish(events.StockSellFailed{OrderID: "ord-1", PaymentID: "pay-unknown", Reason: "no_lock"})
	require.Eventually(t, func() bool { return len(s.stream(natsx.StreamDeadLetter)) == 1 }, 10*time.Second, 20*time.Millisecond)

	s.settle() // every message was handled and whatever it emitted published: a wrong extra event would show
	assert.Equal(t, []string{events.SubjectPaymentSucceeded, events.SubjectPaymentRefundRequested, events.SubjectPaymentRefunded},
		s.subjects(natsx.StreamPayment))
	refunded := s.stream(natsx.StreamPayment)[2]
	_, ev, err := events.Decode[events.PaymentRefunded](refunded.Data)
	require.NoError(t, err)
	assert.Equal(t, events.PaymentRefunded{PaymentID: paid.PaymentID, OrderID: "ord-1", Amount: 9800}, ev)
	assert.Equal(t, "payment.refunded:"+paid.PaymentID, refunded.Header.Get(jetstream.MsgIDHeader))
}

// The parts plug into service.Spec as they are.
var _ func(context.Context, service.Deps) (service.Parts, error) = wire.Parts(config.Config{})
