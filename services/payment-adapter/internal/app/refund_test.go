package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	paymentpg "github.com/stockflow/stockflow/services/payment-adapter/internal/postgres"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
)

type env struct {
	t    *testing.T
	pool *pgxpool.Pool
	svc  *app.Service
	sb   *sandbox.Provider
	stub *stub
	now  time.Time
}

func setup(t *testing.T) *env {
	t.Helper()
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	sb, err := sandbox.New("app-test")
	require.NoError(t, err)
	st := newStub("stub-secret")
	reg, err := payment.NewRegistry(sb, st)
	require.NoError(t, err)
	e := &env{t: t, pool: pool, sb: sb, stub: st, now: time.Now().UTC().Truncate(time.Microsecond)}
	e.svc = app.New(paymentpg.New(pool), reg, slog.New(slog.DiscardHandler), app.WithClock(func() time.Time { return e.now }))
	return e
}

// order makes the order known, as consuming its order.created does.
func (e *env) order(orderID string) {
	e.t.Helper()
	err := e.svc.RememberOrder(context.Background(), inbox.Message{Consumer: "c", ID: "created-" + orderID},
		events.OrderCreated{OrderID: orderID, Total: 9800, Currency: "CNY", PaymentDeadline: e.now.Add(30 * time.Minute)})
	require.NoError(e.t, err)
}

// payVia makes order id known and records a payment of amount for it through provider (sandbox
// or stub).
func (e *env) payVia(provider, orderID, txn string, amount int64) *payment.Payment {
	e.t.Helper()
	e.order(orderID)
	body := []byte(`{"provider_txn_id":"` + txn + `","order_id":"` + orderID + `","amount":` + strconv.FormatInt(amount, 10) + `,"currency":"CNY","status":"succeeded"}`)
	h := http.Header{}
	h.Set(sandbox.SignatureHeader, e.sb.Sign(body))
	if provider == "stub" {
		h = e.stub.sign(body)
	}
	res, err := e.svc.HandleCallback(context.Background(), provider, h, body)
	require.NoError(e.t, err)
	return res.Payment
}

func (e *env) paid(orderID, txn string, amount int64) *payment.Payment {
	return e.payVia("sandbox", orderID, txn, amount)
}

// drive runs the second step of every refund requested so far, as the
// payment-adapter-refund-requested consumer does, and returns the errors it returned.
func (e *env) drive() []error {
	e.t.Helper()
	var errs []error
	for _, ev := range outboxOf[events.PaymentRefundRequested](e.t, e.pool, events.SubjectPaymentRefundRequested) {
		if err := e.svc.ExecuteRefund(context.Background(), inbox.Message{Consumer: "c", ID: "x"}, ev); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// outboxOf decodes the outbox rows of subject, oldest first.
func outboxOf[T events.Payload](t *testing.T, pool *pgxpool.Pool, subject string) []T {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT data FROM outbox WHERE subject = $1 ORDER BY id`, subject)
	require.NoError(t, err)
	defer rows.Close()
	var out []T
	for rows.Next() {
		var b []byte
		require.NoError(t, rows.Scan(&b))
		_, ev, err := events.Decode[T](b)
		require.NoError(t, err)
		out = append(out, ev)
	}
	require.NoError(t, rows.Err())
	return out
}

func (e *env) refunded() []string {
	e.t.Helper()
	var ids []string
	for _, ev := range outboxOf[events.PaymentRefunded](e.t, e.pool, events.SubjectPaymentRefunded) {
		ids = append(ids, ev.PaymentID)
	}
	return ids
}

func (e *env) requested() []string {
	e.t.Helper()
	var ids []string
	for _, ev := range outboxOf[events.PaymentRefundRequested](e.t, e.pool, events.SubjectPaymentRefundRequested) {
		ids = append(ids, ev.PaymentID)
	}
	return ids
}

func (e *env) get(id string) *payment.Payment {
	e.t.Helper()
	p, err := e.svc.Get(context.Background(), id)
	require.NoError(e.t, err)
	return p
}

func (e *env) status(id string) payment.Status { return e.get(id).Status() }

func (e *env) refundState(id string) payment.RefundState {
	e.t.Helper()
	r := e.get(id).Refund()
	require.NotNil(e.t, r, "payment %s has a refund", id)
	return r.State
}

func TestSellFailedRefundsThatPaymentOnce(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	p := e.paid("ord-1", "txn-1", 9800)
	in := inbox.Message{Consumer: "payment-adapter-stock-sell-failed", ID: "sf-1"}
	require.NoError(t, e.svc.RefundPayment(ctx, in, p.ID(), "sell_failed: insufficient_stock"))
	assert.Equal(t, payment.Succeeded, e.status(p.ID()), "only requested: the provider is not asked in the transaction")
	assert.Equal(t, payment.RefundRequested, e.refundState(p.ID()))
	assert.Equal(t, []string{p.ID()}, e.requested())
	assert.Empty(t, e.refunded())

	require.Empty(t, e.drive())
	assert.Equal(t, payment.Refunded, e.status(p.ID()))
	assert.Equal(t, []string{p.ID()}, e.refunded())

	// Redelivery, a second sell_failed, then the order's refund request, and the second step
	// run again: nothing more.
	require.NoError(t, e.svc.RefundPayment(ctx, in, p.ID(), "sell_failed"))
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: in.Consumer, ID: "sf-2"}, p.ID(), "sell_failed"))
	require.NoError(t, e.svc.RefundOrder(ctx, inbox.Message{Consumer: "payment-adapter-order-refund-requested", ID: "rr-1"}, "ord-1", "buyer"))
	require.Empty(t, e.drive())
	assert.Equal(t, []string{p.ID()}, e.requested(), "one request")
	assert.Equal(t, []string{p.ID()}, e.refunded(), "one payment.refunded")

	got := e.get(p.ID())
	require.NotNil(t, got.Refund())
	assert.Equal(t, "refund-"+p.ID(), got.Refund().ID)
	assert.Equal(t, "sandbox-refund-"+p.ID(), got.Refund().ProviderRefundID)
	assert.Equal(t, "sell_failed: insufficient_stock", got.Refund().Reason)
	assert.Equal(t, e.now, got.Refund().At)
}

func TestRefundRequestedRefundsEverySucceededPaymentOfTheOrder(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	a := e.paid("ord-1", "txn-a", 9800)
	b := e.paid("ord-1", "txn-b", 9800) // an extra payment of the same order
	bad := e.paid("ord-1", "txn-c", 1)  // amount mismatch: never paid the order, its refund requested at once
	other := e.paid("ord-2", "txn-d", 9800)
	require.Equal(t, payment.RefundRequested, bad.Refund().State)

	in := inbox.Message{Consumer: "payment-adapter-order-refund-requested", ID: "rr-1"}
	require.NoError(t, e.svc.RefundOrder(ctx, in, "ord-1", "buyer"))
	require.NoError(t, e.svc.RefundOrder(ctx, in, "ord-1", "buyer")) // redelivery
	require.Empty(t, e.drive())
	assert.ElementsMatch(t, []string{a.ID(), b.ID()}, e.refunded(), "no payment.refunded for the mismatch: the order had its payment.failed")
	assert.ElementsMatch(t, []string{a.ID(), b.ID(), bad.ID()}, e.requested())
	assert.Equal(t, payment.Refunded, e.status(bad.ID()))
	assert.Equal(t, "refund-"+bad.ID(), e.get(bad.ID()).Refund().ID, "its one refund, not a second one")
	assert.Equal(t, payment.Succeeded, e.status(other.ID()))
}

// TestRefundRequestedForAnOrderNoPaymentPaidIsNothingToRefund (review F12): an order sold by
// hand has no payment here, or only failed ones; its refund request is answered
// payment.nothing_to_refund, once, so that the order can complete. An order whose only
// succeeded payment was refunded already for another reason gets nothing: it waits for a
// human.
func TestRefundRequestedForAnOrderNoPaymentPaidIsNothingToRefund(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	require.NoError(t, e.svc.RefundOrder(ctx, inbox.Message{Consumer: "c", ID: "rr-none"}, "ord-never-paid", ""))
	bad := e.paid("ord-1", "txn-c", 1) // its refund requested when recorded, with no payment.refunded
	require.Empty(t, e.drive())
	require.Equal(t, payment.Refunded, e.status(bad.ID()))
	in := inbox.Message{Consumer: "c", ID: "rr-failed"}
	require.NoError(t, e.svc.RefundOrder(ctx, in, "ord-1", ""))
	require.NoError(t, e.svc.RefundOrder(ctx, in, "ord-1", "")) // redelivery

	late := e.paid("ord-2", "txn-d", 9800)
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf-d"}, late.ID(), "sell_failed: released"))
	require.Empty(t, e.drive())
	require.NoError(t, e.svc.RefundOrder(ctx, inbox.Message{Consumer: "c", ID: "rr-late"}, "ord-2", ""))

	var orders []string
	for _, ev := range outboxOf[events.PaymentNothingToRefund](t, e.pool, events.SubjectPaymentNothingToRefund) {
		orders = append(orders, ev.OrderID)
	}
	assert.Equal(t, []string{"ord-never-paid", "ord-1"}, orders, "once each; none for ord-2, which a payment paid")
	assert.Equal(t, []string{late.ID()}, e.refunded())
	assert.ElementsMatch(t, []string{bad.ID(), late.ID()}, e.requested())
}

func TestSellFailedForUnknownPaymentIsPermanent(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	err := e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf-x"}, "no-such-payment", "sell_failed")
	assert.ErrorIs(t, err, app.ErrPaymentUnknown)
	err = e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf-y"}, "", "sell_failed")
	assert.ErrorIs(t, err, app.ErrPaymentUnknown)
	var claims int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM inbox`).Scan(&claims))
	assert.Zero(t, claims, "a failed message is not marked processed")
}

// A payment.refund_requested of no recorded refund is poison: malformed or forged, never a race.
func TestRefundRequestOfAnUnknownRefundIsPermanent(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	p := e.paid("ord-1", "txn-1", 9800)
	for name, ev := range map[string]events.PaymentRefundRequested{
		"unknown payment":       {PaymentID: "pay-x", OrderID: "ord-1", RefundID: "refund-pay-x"},
		"payment not refunding": {PaymentID: p.ID(), OrderID: "ord-1", RefundID: "refund-" + p.ID()},
		"another refund id":     {PaymentID: p.ID(), OrderID: "ord-1", RefundID: "refund-other"},
	} {
		err := e.svc.ExecuteRefund(ctx, inbox.Message{}, ev)
		assert.ErrorIs(t, err, app.ErrRefundUnknown, name)
	}
	assert.Equal(t, payment.Succeeded, e.status(p.ID()))
	assert.Nil(t, e.get(p.ID()).Refund())
}

// TestPendingRefundWaitsForTheProvidersNotification: the provider accepts the refund but the
// money is not back; its notification completes the refund, once, however often it comes.
func TestPendingRefundWaitsForTheProvidersNotification(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.stub.set(func(s *stub) { s.refundAnswer = payment.RefundPending })
	p := e.payVia("stub", "ord-1", "txn-1", 9800)
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf"}, p.ID(), "sell_failed"))
	require.Empty(t, e.drive())
	require.Empty(t, e.drive(), "a pending refund is not asked again by a redelivery")
	assert.Equal(t, 1, e.stub.callsOf("refund-"+p.ID()))
	assert.Equal(t, payment.RefundInProgress, e.refundState(p.ID()))
	assert.Equal(t, payment.Succeeded, e.status(p.ID()))
	assert.Empty(t, e.refunded())

	body := refundNotice("txn-1", "refund-"+p.ID(), "stub-refund-"+p.ID(), "succeeded")
	for range 3 {
		res, err := e.svc.HandleCallback(ctx, "stub", e.stub.sign(body), body)
		require.NoError(t, err)
		assert.True(t, res.RefundNotice)
	}
	assert.Equal(t, payment.Refunded, e.status(p.ID()))
	assert.Equal(t, []string{p.ID()}, e.refunded(), "one payment.refunded for three notifications")
}

// TestRefundNotificationBeforeTheCallsAnswerCommits: the provider's notification is applied
// between our call and the transaction that records its (pending) answer: the answer does not
// take the refund back.
func TestRefundNotificationBeforeTheCallsAnswerCommits(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	p := e.payVia("stub", "ord-1", "txn-1", 9800)
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf"}, p.ID(), "sell_failed"))
	body := refundNotice("txn-1", "refund-"+p.ID(), "", "succeeded")
	res, err := e.svc.HandleCallback(ctx, "stub", e.stub.sign(body), body)
	require.NoError(t, err)
	assert.False(t, res.Duplicate)
	require.Equal(t, payment.Refunded, e.status(p.ID()))

	e.stub.set(func(s *stub) { s.refundAnswer = payment.RefundPending })
	require.Empty(t, e.drive(), "the request step finds the refund done and does not ask")
	assert.Zero(t, e.stub.callsOf("refund-"+p.ID()))
	assert.Equal(t, payment.RefundDone, e.refundState(p.ID()))
	assert.Equal(t, []string{p.ID()}, e.refunded())
}

func TestRefundNotificationEdges(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.stub.set(func(s *stub) { s.refundAnswer = payment.RefundPending })
	notRefunding := e.payVia("stub", "ord-1", "txn-1", 9800)
	refunding := e.payVia("stub", "ord-2", "txn-2", 9800)
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf"}, refunding.ID(), "sell_failed"))
	require.Empty(t, e.drive())

	call := func(body []byte) (app.CallbackResult, error) {
		return e.svc.HandleCallback(ctx, "stub", e.stub.sign(body), body)
	}
	// A transaction we have no payment for: 503, the provider retries.
	_, err := call(refundNotice("txn-unknown", "refund-x", "", "succeeded"))
	assert.ErrorIs(t, err, payment.ErrTxnUnknown)

	// A refund we never requested, and a refund id that is not ours: 2xx, nothing changed.
	res, err := call(refundNotice("txn-1", "", "dashboard-refund-1", "succeeded"))
	require.NoError(t, err)
	assert.True(t, res.Unmatched)
	assert.Nil(t, e.get(notRefunding.ID()).Refund())
	assert.Equal(t, payment.Succeeded, e.status(notRefunding.ID()))
	res, err = call(refundNotice("txn-2", "refund-someone-else", "", "succeeded"))
	require.NoError(t, err)
	assert.True(t, res.Unmatched)
	res, err = call(refundNotice("txn-2", "", "stub-other", "succeeded"))
	require.NoError(t, err)
	assert.True(t, res.Unmatched, "another provider refund id than the one the provider gave us")
	assert.Equal(t, payment.RefundInProgress, e.refundState(refunding.ID()))

	// Malformed: no refund id at all, or no status.
	_, err = call(refundNotice("txn-2", "", "", "succeeded"))
	assert.ErrorIs(t, err, payment.ErrMalformedNotification)
	_, err = call(refundNotice("txn-2", "refund-"+refunding.ID(), "", "maybe"))
	assert.ErrorIs(t, err, payment.ErrMalformedNotification)

	// A pending notification of a pending refund is a duplicate; failed then marks it failed,
	// and it stays visible.
	res, err = call(refundNotice("txn-2", "refund-"+refunding.ID(), "", "pending"))
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
	_, err = call(refundNotice("txn-2", "refund-"+refunding.ID(), "", "failed"))
	require.NoError(t, err)
	assert.Equal(t, payment.RefundRefused, e.refundState(refunding.ID()))
	failed, err := e.svc.ListFailedRefunds(ctx, 10)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	assert.Equal(t, refunding.ID(), failed[0].ID())
	assert.Empty(t, e.refunded())

	// An ignored kind: acknowledged, nothing stored.
	res, err = call([]byte(`{"event":"charge.dispute.created"}`))
	require.NoError(t, err)
	assert.True(t, res.Ignored)
	assert.Nil(t, res.Payment)
}

// TestRefundProviderDownIsRetriedThenMade: the provider's refund API is down: each attempt is
// recorded and the consumer retries (ErrProviderUnavailable); when it is back, the refund is
// made once.
func TestRefundProviderDownIsRetriedThenMade(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.stub.set(func(s *stub) { s.refundErr = errDown })
	p := e.payVia("stub", "ord-1", "txn-1", 9800)
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf"}, p.ID(), "sell_failed"))
	for i := range 3 {
		errs := e.drive()
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], app.ErrProviderUnavailable)
		r := e.get(p.ID()).Refund()
		assert.Equal(t, i+1, r.Attempts)
		assert.Contains(t, r.LastError, "connection refused")
		assert.True(t, r.NextAttemptAt.After(e.now), "the next attempt is scheduled")
		assert.Equal(t, payment.RefundRequested, r.State)
	}
	e.stub.set(func(s *stub) { s.refundErr = nil })
	require.Empty(t, e.drive())
	assert.Equal(t, payment.Refunded, e.status(p.ID()))
	assert.Equal(t, []string{p.ID()}, e.refunded())
	assert.True(t, e.get(p.ID()).Refund().NextAttemptAt.IsZero())
}

// TestRefundRefusedOrFailedStaysVisible: the provider refuses the refund, or reports it failed:
// the refund is failed, never retried into a second refund, never dropped.
func TestRefundRefusedOrFailedStaysVisible(t *testing.T) {
	for name, set := range map[string]func(s *stub){
		"refused": func(s *stub) { s.refundErr = fmt.Errorf("stub: %w: not refundable", payment.ErrProviderRefused) },
		"failed":  func(s *stub) { s.refundAnswer = payment.RefundFailed },
	} {
		t.Run(name, func(t *testing.T) {
			e := setup(t)
			ctx := context.Background()
			e.stub.set(set)
			p := e.payVia("stub", "ord-1", "txn-1", 9800)
			require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf"}, p.ID(), "sell_failed"))
			require.Empty(t, e.drive(), "acknowledged: retrying cannot help")
			require.Empty(t, e.drive())
			assert.Equal(t, 1, e.stub.callsOf("refund-"+p.ID()))
			r := e.get(p.ID()).Refund()
			assert.Equal(t, payment.RefundRefused, r.State)
			assert.NotEmpty(t, r.LastError)
			assert.Equal(t, payment.Succeeded, e.status(p.ID()))
			assert.Empty(t, e.refunded())
			// A later refund request of the same payment does not start a second refund.
			require.NoError(t, e.svc.RefundOrder(ctx, inbox.Message{Consumer: "c", ID: "rr"}, "ord-1", "buyer"))
			assert.Equal(t, payment.RefundRefused, e.refundState(p.ID()))
			assert.Len(t, e.requested(), 1)
		})
	}
}

func TestRememberOrderKeepsTheFirstTotal(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	require.NoError(t, e.svc.RememberOrder(ctx, inbox.Message{Consumer: "c", ID: "m1"}, events.OrderCreated{OrderID: "o", Total: 100, Currency: "CNY"}))
	require.NoError(t, e.svc.RememberOrder(ctx, inbox.Message{Consumer: "c", ID: "m1"}, events.OrderCreated{OrderID: "o", Total: 100, Currency: "CNY"}))
	require.NoError(t, e.svc.RememberOrder(ctx, inbox.Message{Consumer: "c", ID: "m2"}, events.OrderCreated{OrderID: "o", Total: 999, Currency: "EUR"}))
	var total int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT total FROM order_totals WHERE order_id = 'o'`).Scan(&total))
	assert.EqualValues(t, 100, total)
}
