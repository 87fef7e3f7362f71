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
// per wait, each under its own event id, and the count and time survive in the database.
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

	rows, _ := e.pool.Query(ctx, `SELECT event_id FROM outbox WHERE subject = $1 AND event_id LIKE '%:redrive:%' ORDER BY id`, events.SubjectPaymentSucceeded)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"payment.succeeded:" + p.ID() + ":redrive:1", "payment.succeeded:" + p.ID() + ":redrive:2"}, ids)

	_, err = e.svc.RedrivePayment(ctx, "nope", 0)
	assert.ErrorIs(t, err, payment.ErrNotFound)
}
