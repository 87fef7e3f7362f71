package reconcile_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	paymentpg "github.com/stockflow/stockflow/services/payment-adapter/internal/postgres"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe/stripetest"
	paymentreconcile "github.com/stockflow/stockflow/services/payment-adapter/internal/reconcile"
)

// env is payment-adapter's use cases on a real database, with Stripe played by its double (a
// real HTTP server speaking Stripe's API) and both jobs configured to look at everything at
// once (ages 0).
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	svc    *app.Service
	stripe *stripetest.Server
	cfg    config.Config
}

func setup(t *testing.T) *env {
	t.Helper()
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	srv := stripetest.New(t)
	sp, err := stripe.New(srv.Config())
	require.NoError(t, err)
	sb, err := sandbox.New("jobs-test")
	require.NoError(t, err)
	reg, err := payment.NewRegistry(sb, sp)
	require.NoError(t, err)
	return &env{t: t, pool: pool, stripe: srv,
		svc: app.New(paymentpg.New(pool), reg, slog.New(slog.DiscardHandler)),
		cfg: config.Config{ReconcileBatch: 100}}
}

// order makes orderID known, as consuming its order.created does.
func (e *env) order(orderID string, total int64) {
	e.t.Helper()
	err := e.svc.RememberOrder(context.Background(), inbox.Message{Consumer: "c", ID: "created-" + orderID},
		events.OrderCreated{OrderID: orderID, Total: total, Currency: "USD", PaymentDeadline: time.Now().Add(30 * time.Minute)})
	require.NoError(e.t, err)
}

func (e *env) run(job reconcile.Job, mode reconcile.Mode) reconcile.Result {
	e.t.Helper()
	res, err := job.Run(context.Background(), mode)
	require.NoError(e.t, err)
	return res
}

func (e *env) subjects() []string {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT subject FROM outbox ORDER BY id`)
	require.NoError(e.t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(e.t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(e.t, rows.Err())
	return out
}

func kinds(res reconcile.Result) map[string]int {
	out := map[string]int{}
	for _, f := range res.Findings {
		k := f.Kind
		if f.Repaired {
			k += "/repaired"
		}
		out[k]++
	}
	return out
}

// TestLostCallbacksAsksTheProviderAndAppliesWhatItSays: of three unpaid orders, one was paid
// at Stripe (its callback lost), one paid the wrong amount, one not paid. Checking reports the
// two and changes nothing; repairing records them as their callbacks would have been (the
// wrong amount failed and its refund requested); a later run finds nothing, and the callback
// arriving late is a duplicate.
func TestLostCallbacksAsksTheProviderAndAppliesWhatItSays(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := paymentreconcile.LostCallbacks(e.svc, e.cfg)
	for _, id := range []string{"ord-paid", "ord-short", "ord-unpaid"} {
		e.order(id, 9800)
	}
	paid := e.stripe.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "ord-paid", Amount: 9800, Currency: "usd"})
	e.stripe.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "ord-short", Amount: 100, Currency: "usd"})
	e.stripe.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "ord-unpaid", Amount: 9800, Currency: "usd", Status: "requires_payment_method"})

	res := e.run(job, reconcile.Check)
	assert.Equal(t, 3, res.Checked)
	assert.Equal(t, map[string]int{"lost_callback": 2}, kinds(res))
	assert.Empty(t, e.subjects(), "checking records nothing")

	res = e.run(job, reconcile.Repair)
	assert.Equal(t, map[string]int{"lost_callback/repaired": 2}, kinds(res))
	ps, err := e.svc.ListByOrder(ctx, "ord-paid")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, payment.Succeeded, ps[0].Status())
	ps, err = e.svc.ListByOrder(ctx, "ord-short")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.True(t, ps[0].CapturedMismatch(), "the wrong amount is a mismatch")
	assert.ElementsMatch(t, []string{events.SubjectPaymentSucceeded, events.SubjectPaymentFailed, events.SubjectPaymentRefundRequested}, e.subjects())

	res = e.run(job, reconcile.Repair)
	assert.Equal(t, 2, res.Checked, "the unpaid order and the one whose payment failed are still asked about")
	assert.Empty(t, res.Findings, "what the provider has is recorded now")

	h, body := e.stripe.Succeed(paid)
	cb, err := e.svc.HandleCallback(ctx, "stripe", h, body)
	require.NoError(t, err)
	assert.True(t, cb.Duplicate, "the lost callback arriving late changes nothing")
	assert.Len(t, e.subjects(), 3)
}

// TestLostCallbacksWithTheProviderDown: a provider that cannot be asked is a finding per
// failed query, asked at most three times in a run, and nothing is recorded.
func TestLostCallbacksWithTheProviderDown(t *testing.T) {
	e := setup(t)
	for _, id := range []string{"ord-1", "ord-2", "ord-3", "ord-4"} {
		e.order(id, 9800)
	}
	for range 4 {
		e.stripe.FailNext("GET", "/v1/payment_intents/search", 500, "api_error", "")
	}
	res := e.run(paymentreconcile.LostCallbacks(e.svc, e.cfg), reconcile.Repair)
	assert.Equal(t, map[string]int{"lost_callback_unknown": 3}, kinds(res))
	assert.Empty(t, e.subjects())
}

// TestUnconfirmedRefundsCompletesWhatTheNotificationNeverBrought: a refund Stripe left
// pending, whose completion event never arrived, is reported by a check and completed by a
// repair (payment.refunded once); a refund Stripe failed is a refund_failed finding in every
// run, never repaired.
func TestUnconfirmedRefundsCompletesWhatTheNotificationNeverBrought(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := paymentreconcile.UnconfirmedRefunds(e.svc, e.cfg)
	pay := func(orderID string) *payment.Payment {
		e.order(orderID, 9800)
		pi := e.stripe.AddPaymentIntent(stripetest.PaymentIntent{OrderID: orderID, Amount: 9800, Currency: "usd", Status: "requires_payment_method"})
		h, body := e.stripe.Succeed(pi)
		cb, err := e.svc.HandleCallback(ctx, "stripe", h, body)
		require.NoError(t, err)
		require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: "c", ID: "sf-" + orderID}, cb.Payment.ID(), "sell_failed"))
		var data []byte
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT data FROM outbox WHERE subject = $1 ORDER BY id DESC LIMIT 1`,
			events.SubjectPaymentRefundRequested).Scan(&data))
		_, ev, err := events.Decode[events.PaymentRefundRequested](data)
		require.NoError(t, err)
		require.NoError(t, e.svc.ExecuteRefund(ctx, inbox.Message{Consumer: "c", ID: "rr-" + orderID}, ev))
		return cb.Payment
	}
	e.stripe.SetRefundStatus("pending")
	pending := pay("ord-pending")
	failing := pay("ord-failing")
	refunds := e.stripe.Refunds()
	require.Len(t, refunds, 2)
	for _, r := range refunds {
		status := "succeeded"
		if r.PaymentIntent != "" && r.Metadata["order_id"] == "ord-failing" {
			status = "failed"
		}
		e.stripe.CompleteRefund(r.ID, status) // the events are made and never delivered
	}

	res := e.run(job, reconcile.Check)
	assert.Equal(t, map[string]int{"refund_unconfirmed": 2}, kinds(res))
	assert.NotContains(t, e.subjects(), events.SubjectPaymentRefunded)

	res = e.run(job, reconcile.Repair)
	assert.Equal(t, map[string]int{"refund_unconfirmed/repaired": 1, "refund_failed": 1}, kinds(res))
	got, err := e.svc.Get(ctx, pending.ID())
	require.NoError(t, err)
	assert.Equal(t, payment.Refunded, got.Status())
	got, err = e.svc.Get(ctx, failing.ID())
	require.NoError(t, err)
	assert.Equal(t, payment.RefundRefused, got.Refund().State)

	res = e.run(job, reconcile.Repair)
	assert.Equal(t, map[string]int{"refund_failed": 1}, kinds(res), "the failed refund stays visible, for a human")
	n := 0
	for _, s := range e.subjects() {
		if s == events.SubjectPaymentRefunded {
			n++
		}
	}
	assert.Equal(t, 1, n, "one payment.refunded, for the refund Stripe completed")
}
