package app_test

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"testing"

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
}

func setup(t *testing.T) *env {
	t.Helper()
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	sb, err := sandbox.New("app-test")
	require.NoError(t, err)
	reg, err := payment.NewRegistry(sb)
	require.NoError(t, err)
	return &env{t: t, pool: pool, svc: app.New(paymentpg.New(pool), reg, slog.New(slog.DiscardHandler)), sb: sb}
}

// paid makes order id known and records a sandbox payment of amount for it.
func (e *env) paid(orderID, txn string, amount int64) *payment.Payment {
	e.t.Helper()
	ctx := context.Background()
	err := e.svc.RememberOrder(ctx, inbox.Message{Consumer: "c", ID: "created-" + orderID + txn},
		events.OrderCreated{OrderID: orderID, Total: 9800, Currency: "CNY"})
	require.NoError(e.t, err)
	body := []byte(`{"provider_txn_id":"` + txn + `","order_id":"` + orderID + `","amount":` + strconv.FormatInt(amount, 10) + `,"currency":"CNY","status":"succeeded"}`)
	h := http.Header{}
	h.Set(sandbox.SignatureHeader, e.sb.Sign(body))
	res, err := e.svc.HandleCallback(ctx, "sandbox", h, body)
	require.NoError(e.t, err)
	return res.Payment
}

func (e *env) refunded() []string {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT data FROM outbox WHERE subject = $1 ORDER BY id`, events.SubjectPaymentRefunded)
	require.NoError(e.t, err)
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var b []byte
		require.NoError(e.t, rows.Scan(&b))
		_, ev, err := events.Decode[events.PaymentRefunded](b)
		require.NoError(e.t, err)
		ids = append(ids, ev.PaymentID)
	}
	require.NoError(e.t, rows.Err())
	return ids
}

func (e *env) status(id string) payment.Status {
	e.t.Helper()
	p, err := e.svc.Get(context.Background(), id)
	require.NoError(e.t, err)
	return p.Status()
}

func TestSellFailedRefundsThatPaymentOnce(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	p := e.paid("ord-1", "txn-1", 9800)
	in := inbox.Message{Consumer: "payment-adapter-stock-sell-failed", ID: "sf-1"}
	require.NoError(t, e.svc.RefundPayment(ctx, in, p.ID(), "sell_failed: insufficient_stock"))
	assert.Equal(t, payment.Refunded, e.status(p.ID()))
	assert.Equal(t, []string{p.ID()}, e.refunded())

	// Redelivery, a second sell_failed, then the order's refund request: nothing more.
	require.NoError(t, e.svc.RefundPayment(ctx, in, p.ID(), "sell_failed"))
	require.NoError(t, e.svc.RefundPayment(ctx, inbox.Message{Consumer: in.Consumer, ID: "sf-2"}, p.ID(), "sell_failed"))
	require.NoError(t, e.svc.RefundOrder(ctx, inbox.Message{Consumer: "payment-adapter-order-refund-requested", ID: "rr-1"}, "ord-1", "buyer"))
	assert.Equal(t, []string{p.ID()}, e.refunded(), "one payment.refunded")

	got, err := e.svc.Get(ctx, p.ID())
	require.NoError(t, err)
	require.NotNil(t, got.Refund())
	assert.Equal(t, "refund-"+p.ID(), got.Refund().ID)
	assert.Equal(t, "sandbox-refund-"+p.ID(), got.Refund().ProviderRefundID)
}

func TestRefundRequestedRefundsEverySucceededPaymentOfTheOrder(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	a := e.paid("ord-1", "txn-a", 9800)
	b := e.paid("ord-1", "txn-b", 9800) // an extra payment of the same order
	bad := e.paid("ord-1", "txn-c", 1)  // amount mismatch: never paid the order, refunded at once
	other := e.paid("ord-2", "txn-d", 9800)
	require.Equal(t, payment.Refunded, bad.Status())

	in := inbox.Message{Consumer: "payment-adapter-order-refund-requested", ID: "rr-1"}
	require.NoError(t, e.svc.RefundOrder(ctx, in, "ord-1", "buyer"))
	require.NoError(t, e.svc.RefundOrder(ctx, in, "ord-1", "buyer")) // redelivery
	assert.ElementsMatch(t, []string{a.ID(), b.ID()}, e.refunded())
	assert.Equal(t, payment.Refunded, e.status(bad.ID()))
	assert.Equal(t, "refund-"+bad.ID(), bad.Refund().ID, "its one refund, not a second one")
	assert.Equal(t, payment.Succeeded, e.status(other.ID()))
}

func TestRefundRequestedWithoutSucceededPaymentIsAcknowledgedSilently(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	require.NoError(t, e.svc.RefundOrder(ctx, inbox.Message{Consumer: "c", ID: "rr-none"}, "ord-never-paid", ""))
	bad := e.paid("ord-1", "txn-c", 1) // refunded when recorded, with no payment.refunded
	require.NoError(t, e.svc.RefundOrder(ctx, inbox.Message{Consumer: "c", ID: "rr-failed"}, "ord-1", ""))
	assert.Empty(t, e.refunded())
	assert.Equal(t, payment.Refunded, e.status(bad.ID()))
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
