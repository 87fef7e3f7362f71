package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// TestRedrivePaymentOncePerWait: the paid_not_sold repair sends one copy of payment.succeeded
// per wait, each its own outbox row and Nats-Msg-Id but the first event's envelope id (the
// consumers' inboxes take one copy only), and the count and time survive in the database.
func TestRedrivePaymentOncePerWait(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	p := e.paid("ord-1", "txn-1", 9800)
	copies := func() int {
		return len(outboxOf[events.PaymentSucceeded](t, e.pool, events.SubjectPaymentSucceeded))
	}
	first := copies()

	n, err := e.svc.RedrivePayment(ctx, p.ID(), time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = e.svc.RedrivePayment(ctx, p.ID(), time.Hour)
	assert.ErrorIs(t, err, payment.ErrRedriveWaiting)
	assert.Equal(t, first+1, copies(), "one copy within the wait")

	e.now = e.now.Add(time.Hour)
	n, err = e.svc.RedrivePayment(ctx, p.ID(), time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, first+2, copies())
	stored := e.get(p.ID()).Snapshot()
	assert.Equal(t, 2, stored.Redrives)
	assert.Equal(t, e.now, stored.RedrivenAt)

	rows, err := e.pool.Query(ctx, `SELECT event_id, data FROM outbox WHERE subject = $1 ORDER BY id`, events.SubjectPaymentSucceeded)
	require.NoError(t, err)
	type row struct {
		ID   string
		Data []byte
	}
	copied, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	var ids []string
	for _, c := range copied {
		ids = append(ids, c.ID)
		env, err := events.Open(c.Data)
		require.NoError(t, err)
		assert.Equal(t, "payment.succeeded:"+p.ID(), env.ID, "every copy is the first event to a consumer's inbox")
	}
	assert.Equal(t, []string{"payment.succeeded:" + p.ID(), "payment.succeeded:" + p.ID() + ":redrive:1", "payment.succeeded:" + p.ID() + ":redrive:2"}, ids)

	_, err = e.svc.RedrivePayment(ctx, "nope", 0)
	assert.ErrorIs(t, err, payment.ErrNotFound)
}
