package service

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// A database outage longer than a consumer's MaxDeliver budget dead-letters nothing: a service
// runs through serve with its database behind a toxiproxy, the proxy goes down (every
// connection dropped, new ones refused), a message arrives and fails delivery after delivery,
// well past MaxDeliver; when the proxy comes back the message is applied once and DEADLETTER
// stays empty (review F5).
func TestADatabaseOutageDeadLettersNothing(t *testing.T) {
	ctx := context.Background()
	direct, dbURL := pgtest.New(t)
	_, err := direct.Exec(ctx, `CREATE TABLE applied (event_id text PRIMARY KEY)`)
	require.NoError(t, err)

	proxy, proxiedURL := pgtest.Proxied(t, dbURL)

	natsURL := natstest.Start(t)
	kit := authtest.New(t)
	addr := freeAddr(t)
	const durable = "outage-test-order-created"
	base := &Base{
		HTTPAddr: addr, DatabaseURL: proxiedURL, NATSURL: natsURL, NATSStreamReplicas: 1, AutoMigrate: true, LogLevel: slog.LevelError,
		ShutdownTimeout: 10 * time.Second, ConsumerAckWait: 30 * time.Second, ConsumerWorkers: 1, RelayBatch: 256,
		ReconcileMode: "check", AuthJWKS: kit.JWKSFile, AuthIssuer: authtest.Issuer, AuthAudience: authtest.Audience,
	}
	var deliveries atomic.Int64
	spec := Spec{Name: "outage-test", Base: base, Config: base,
		Wire: func(_ context.Context, d Deps) (Parts, error) {
			mux := http.NewServeMux()
			httpx.Health(mux, d.Ready)
			return Parts{Handler: mux, Consumers: []Consumer{{
				Spec: natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: durable, MaxDeliver: 2,
					FilterSubjects: []string{events.SubjectOrderCreated}},
				Handle: func(ctx context.Context, msg jetstream.Msg) error {
					deliveries.Add(1)
					_, err := d.Pool.Exec(ctx, `INSERT INTO applied VALUES ($1) ON CONFLICT DO NOTHING`, msg.Headers().Get(jetstream.MsgIDHeader))
					return err
				},
			}}}, nil
		}}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Main(sctx, nil, io.Discard, spec) }()
	defer func() {
		cancel()
		assert.NoError(t, <-done, "serve")
	}()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the service never became ready")

	proxy.Stop()
	nc, js, err := natsx.Connect(ctx, natsURL, t.Name())
	require.NoError(t, err)
	defer nc.Close()
	_, err = js.Publish(ctx, events.SubjectOrderCreated, []byte(`{}`), jetstream.WithMsgID("during-the-outage"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return deliveries.Load() >= 4 }, 30*time.Second, 50*time.Millisecond,
		"the message is retried while the database is away")

	require.NoError(t, proxy.Start())
	require.Eventually(t, func() bool {
		var n int
		return direct.QueryRow(ctx, `SELECT count(*) FROM applied WHERE event_id = 'during-the-outage'`).Scan(&n) == nil && n == 1
	}, 30*time.Second, 50*time.Millisecond, "the message was not applied once the database came back")
	dl, err := js.Stream(ctx, natsx.StreamDeadLetter)
	require.NoError(t, err)
	info, err := dl.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.State.Msgs, "an outage dead-lettered the message after %d deliveries", deliveries.Load())
	var n int
	require.NoError(t, direct.QueryRow(ctx, `SELECT count(*) FROM applied`).Scan(&n))
	assert.Equal(t, 1, n)
}
