package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"

	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/telemetry/metricstest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func get(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestServeExposesMetricsWithoutAToken runs a service through serve, as its main does, against
// a real database and NATS server: GET /metrics answers without a token (while the admin API
// wants one) with the HTTP metrics per route pattern, the outbox backlog (rising with a row,
// back to 0 once the relay published it), the consumer's lag and its dead letters.
func TestServeExposesMetricsWithoutAToken(t *testing.T) {
	var otelErrs errorLog
	otel.SetErrorHandler(&otelErrs)
	_, dbURL := pgtest.New(t)
	natsURL := natstest.Start(t)
	kit := authtest.New(t)
	addr := freeAddr(t)
	const durable = "metrics-test-order-created"
	base := &Base{
		HTTPAddr: addr, DatabaseURL: dbURL, NATSURL: natsURL, NATSStreamReplicas: 1, AutoMigrate: true, LogLevel: slog.LevelWarn,
		ShutdownTimeout: 10 * time.Second, ConsumerAckWait: 30 * time.Second, ConsumerWorkers: 1, RelayBatch: 256,
		ReconcileMode: "check", AuthJWKS: kit.JWKSFile, AuthIssuer: authtest.Issuer, AuthAudience: authtest.Audience,
	}
	var pool postgres.Beginner
	spec := Spec{Name: "metrics-test", Base: base, Config: base,
		Wire: func(_ context.Context, d Deps) (Parts, error) {
			pool = d.Pool
			mux := http.NewServeMux()
			mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
			httpx.Health(mux, d.Ready)
			httpx.NotFound(mux)
			return Parts{Handler: mux, Consumers: []Consumer{{
				Spec: natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: durable, FilterSubjects: []string{events.SubjectOrderCreated}},
				Handle: func(context.Context, jetstream.Msg) error {
					return natsx.Permanent(fmt.Errorf("not an order"))
				},
			}}}, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Main(ctx, nil, io.Discard, spec) }()
	defer func() {
		cancel()
		assert.NoError(t, <-done, "serve")
	}()
	url := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the service never became ready")

	scrape := func() metricstest.Scrape {
		code, body := get(t, url+"/metrics", "")
		require.Equal(t, http.StatusOK, code, "no token needed: %s", body)
		return metricstest.Parse(t, strings.NewReader(body))
	}
	code, body := get(t, url+"/healthz", "")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"status":"ok","version":"dev"}`, body, "the build, unstamped under go test")
	code, _ = get(t, url+"/v1/admin/reconcile/runs", "")
	assert.Equal(t, http.StatusUnauthorized, code, "the admin API wants a token")
	s := scrape()
	assert.True(t, s.Has("stockflow_outbox_backlog", nil), s.Text)
	lag := metricstest.Labels{"stream": natsx.StreamOrder, "consumer": durable}
	assert.True(t, s.Has("stockflow_messaging_consumer_lag", lag), "%v", s.Series("stockflow_messaging_consumer_lag"))
	assert.False(t, s.Has("http_server_request_duration_seconds", metricstest.Labels{"http_route": "/metrics"}), "scrapes are not measured")

	for _, host := range []string{"a.example", "b.example"} {
		code, _ := get(t, url+"/v1/things/42", host)
		require.Equal(t, http.StatusNoContent, code)
	}
	code, _ = get(t, url+"/v1/things/42/nope/7", "")
	require.Equal(t, http.StatusNotFound, code)

	// A row waits in the outbox until the relay publishes it.
	require.NoError(t, postgres.InTx(ctx, pool, func(tx pgx.Tx) error {
		return outbox.Write(ctx, tx, events.Message{ID: "poison-1", Subject: events.SubjectOrderCreated, Data: []byte(`{}`)})
	}))
	// The relay marks the row published after JetStream's ack, so the consumer may dead-letter
	// the message before the backlog shows 0: both are waited for.
	require.Eventually(t, func() bool {
		s = scrape()
		return s.Value("stockflow_messaging_terminated_total", metricstest.Labels{"consumer": durable, "reason": "poison"}) == 1 &&
			s.Value("stockflow_outbox_backlog", nil) == 0
	}, 30*time.Second, 50*time.Millisecond, "the relay publishes the row and marks it published, the consumer dead-letters it")

	route := metricstest.Labels{"http_route": "/v1/things/{id}", "http_request_method": "GET", "http_response_status_code": "204"}
	assert.Equal(t, 2.0, s.Value("http_server_request_duration_seconds", route), "%v", s.Series("http_server_request_duration_seconds"))
	assert.Equal(t, 1.0, s.Value("http_server_request_duration_seconds", metricstest.Labels{"http_route": "/", "http_response_status_code": "404"}))
	assert.Equal(t, 1.0, s.Value("http_server_request_duration_seconds",
		metricstest.Labels{"http_route": "/v1/admin/reconcile/runs", "http_response_status_code": "401"}))
	for _, series := range s.Series("http_server_request_duration_seconds") {
		assert.NotContains(t, series, "example", "no Host header in the labels")
		assert.NotContains(t, series, "42", "no raw path in the labels")
	}
	assert.Empty(t, otelErrs.all(), "no error collecting or exporting (exemplars included)")
	var excerpt []string
	for _, line := range strings.Split(s.Text, "\n") {
		if strings.HasPrefix(line, "stockflow_") || strings.HasPrefix(line, "http_server_request_duration_seconds_count") || strings.HasPrefix(line, "target_info") {
			excerpt = append(excerpt, line)
		}
	}
	t.Logf("GET /metrics (excerpt):\n%s", strings.Join(excerpt, "\n"))
}

// errorLog is an otel error handler that keeps what it is given.
type errorLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errorLog) Handle(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err.Error())
}

func (l *errorLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}
