package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/deadletter"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// The CLI against two services' real dead-letter APIs on one NATS: stock, whose consumer
// dead-letters an order for an unknown SKU, and order, which has no dead letters. list finds
// it at stock, show and replay find the service that owns it, a second replay says the inbox
// made it change nothing, and the locked count moves once.
func TestDLQCommands(t *testing.T) {
	ctx := context.Background()
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))
	kit := authtest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	pool, _ := pgtest.New(t, inbox.Schema, deadletter.Schema)
	_, err = pool.Exec(ctx, `CREATE TABLE locked (qty bigint NOT NULL); INSERT INTO locked VALUES (0)`)
	require.NoError(t, err)
	var known atomic.Bool
	h := natsx.On("stock-order-created", natsx.Errors{}, func(ctx context.Context, in inbox.Message, ev events.OrderCreated) error {
		if !known.Load() {
			return natsx.Permanent(errors.New("lock order " + ev.OrderID + ": unknown sku " + ev.Items[0].SKU))
		}
		return postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
			fresh, err := inbox.Claim(ctx, tx, in.Consumer, in.ID)
			if err != nil || !fresh {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE locked SET qty = qty + $1`, ev.Items[0].Qty)
			return err
		})
	})
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "stock-order-created",
		FilterSubjects: []string{events.SubjectOrderCreated + ".>"}}, h, log)
	require.NoError(t, err)
	t.Cleanup(stop)

	mount := func(handlers map[string]natsx.Handler) string {
		srv := httptest.NewServer(deadletter.Mount(http.NotFoundHandler(), deadletter.New(pool, js, handlers, log), log, kit.Verifier))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	c := dlqClient{
		urls: map[string]string{
			"stock": mount(map[string]natsx.Handler{"stock-order-created": h}),
			"order": mount(map[string]natsx.Handler{"order-stock-outcomes": func(context.Context, jetstream.Msg) error { return nil }}),
		},
		token: func(admin bool) (string, error) {
			if admin {
				return kit.Token("alice", auth.Admin), nil
			}
			return kit.Token("bob", auth.Operator), nil
		},
		http: http.DefaultClient,
	}
	services := []string{"order", "stock"}

	m, err := events.Encode(events.OrderCreated{OrderID: "o-7", BuyerID: "b-1", Currency: "EUR", Total: 200,
		PaymentDeadline: time.Now().Add(time.Hour), Items: []events.OrderItem{{SKU: "tee-red-m", Qty: 2, UnitPrice: 100}}}, time.Now())
	require.NoError(t, err)
	_, err = js.Publish(ctx, m.Subject, m.Data, jetstream.WithMsgID(m.ID))
	require.NoError(t, err)

	pending := url.Values{"state": {"pending"}, "limit": {"50"}}
	var out bytes.Buffer
	require.Eventually(t, func() bool {
		out.Reset()
		return dlqList(ctx, c, services, pending, false, false, &out) == nil && bytes.Contains(out.Bytes(), []byte("stock-order-created"))
	}, 10*time.Second, 50*time.Millisecond)
	t.Logf("stockflow dlq list\n%s", out.String())
	assert.Regexp(t, regexp.MustCompile(`(?m)^stock\s+1\s+\S+\s+stock-order-created\s+order\.created\.\d+\.\S+\s+poison\s+1\s+0\s+stock-order-created: lock order o-7: unknown sku`), out.String())

	out.Reset()
	require.NoError(t, dlqOne(ctx, c, services, "show", 1, false, &out))
	t.Logf("stockflow dlq show 1\n%s", out.String())
	assert.Contains(t, out.String(), `"sku": "tee-red-m"`)
	assert.Contains(t, out.String(), "original:       ORDER seq 1")

	out.Reset()
	err = dlqOne(ctx, c, services, "replay", 1, false, &out)
	t.Logf("stockflow dlq replay 1 (before the fix): %v", err)
	assert.ErrorContains(t, err, "422 replay_failed")

	known.Store(true)
	out.Reset()
	require.NoError(t, dlqOne(ctx, c, services, "replay", 1, false, &out))
	require.NoError(t, dlqOne(ctx, c, services, "replay", 1, false, &out))
	t.Logf("stockflow dlq replay 1, twice\n%s", out.String())
	assert.Contains(t, out.String(), "the inbox made this replay change nothing")
	var qty int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT qty FROM locked`).Scan(&qty))
	assert.Equal(t, int64(2), qty, "applied once")

	out.Reset()
	require.NoError(t, dlqList(ctx, c, services, pending, false, false, &out))
	assert.Equal(t, "no pending dead letters\n", out.String())
	out.Reset()
	all := url.Values{"state": {"all"}, "limit": {"50"}, "consumer": {"stock-order-created"}}
	require.NoError(t, dlqList(ctx, c, services, all, true, false, &out))
	t.Logf("stockflow dlq list -state all -consumer stock-order-created\n%s", out.String())
	assert.Contains(t, out.String(), "3 (done)")

	err = dlqOne(ctx, c, services, "show", 99, false, &out)
	assert.ErrorContains(t, err, "404 dead_letter_not_found")
	c.token = func(bool) (string, error) { return kit.Token("vera", auth.Viewer), nil }
	err = dlqOne(ctx, c, []string{"stock"}, "replay", 1, false, &out)
	assert.ErrorContains(t, err, "403 forbidden")
}
