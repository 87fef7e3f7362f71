package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/telemetry"
)

func TestSetupWithoutExporter(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	shutdown, err := telemetry.Setup(context.Background(), "test", nil)
	require.NoError(t, err)

	// Nowhere to send spans: none is recorded, yet each has ids that travel on.
	ctx, span := otel.Tracer("test").Start(context.Background(), "request")
	assert.False(t, span.IsRecording(), "a span with no exporter is not recorded")
	assert.True(t, span.SpanContext().IsValid(), "it still has a trace id for headers and logs")
	h := nats.Header{}
	telemetry.InjectNATS(ctx, h)
	assert.Contains(t, h.Get("traceparent"), span.SpanContext().TraceID().String())
	span.End()
	require.NoError(t, shutdown(context.Background()))

	_, err = telemetry.Setup(context.Background(), "", nil)
	assert.Error(t, err, "service name required")
}

func TestNATSHeadersCarryTraceContext(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	shutdown, err := telemetry.Setup(context.Background(), "test", exp)
	require.NoError(t, err)
	defer func() { require.NoError(t, shutdown(context.Background())) }()

	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "produce")
	defer span.End()
	h := nats.Header{}
	telemetry.InjectNATS(ctx, h)
	require.NotEmpty(t, h.Get("traceparent"))

	got := trace.SpanContextFromContext(telemetry.ExtractNATS(context.Background(), h))
	assert.True(t, got.IsRemote())
	assert.Equal(t, span.SpanContext().TraceID(), got.TraceID())
	assert.Equal(t, span.SpanContext().SpanID(), got.SpanID())
	assert.False(t, trace.SpanContextFromContext(telemetry.ExtractNATS(context.Background(), nil)).IsValid())
}

// TestTraceFlowsFromHTTPThroughOutboxAndNATSToConsumer follows one request: an HTTP handler
// writes an outbox row, the relay publishes it, a natsx consumer handles it. The relay's send
// span must be a child of the HTTP server span, and the consumer's span a child of the send,
// in the same trace.
func TestTraceFlowsFromHTTPThroughOutboxAndNATSToConsumer(t *testing.T) {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	shutdown, err := telemetry.Setup(ctx, "test", exp)
	require.NoError(t, err)

	pool, _ := pgtest.New(t, outbox.Schema)
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))

	api := httptest.NewServer(telemetry.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := postgres.InTx(r.Context(), pool, func(tx pgx.Tx) error {
			return outbox.Write(r.Context(), tx, events.Message{ID: "ev-1", Subject: events.SubjectOrderCreated, Data: []byte(`{}`)})
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}), "POST /orders"))
	defer api.Close()
	resp, err := http.Post(api.URL+"/orders", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	relay := outbox.NewRelay(pool, js, outbox.RelayOptions{})
	require.Eventually(t, func() bool { // a pass publishes nothing while a transaction anywhere on the server holds xmin back
		n, err := relay.PublishPending(ctx)
		return assert.NoError(t, err) && n == 1
	}, 20*time.Second, 10*time.Millisecond)

	handled := make(chan trace.SpanContext, 1)
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "trace"},
		func(ctx context.Context, msg jetstream.Msg) error {
			handled <- trace.SpanContextFromContext(ctx)
			return nil
		}, nil)
	require.NoError(t, err)
	var consumerCtx trace.SpanContext
	select {
	case consumerCtx = <-handled:
	case <-time.After(10 * time.Second):
		t.Fatal("message not consumed")
	}
	stop()
	tp, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	require.True(t, ok, "Setup installs the SDK provider")
	require.NoError(t, tp.ForceFlush(ctx)) // the batcher into exp (Shutdown would also reset exp)
	defer func() { require.NoError(t, shutdown(ctx)) }()

	spans := exp.GetSpans()
	var server, send, consumer *tracetest.SpanStub
	for i := range spans {
		switch s := &spans[i]; {
		case s.SpanKind == trace.SpanKindServer && s.Name == "POST /orders":
			server = s
		case s.SpanKind == trace.SpanKindProducer && s.Name == "send "+events.SubjectOrderCreated:
			send = s
		case s.SpanKind == trace.SpanKindConsumer && s.Name == "process "+events.SubjectOrderCreated:
			consumer = s
		}
	}
	require.NotNil(t, server, "no HTTP server span among %d spans", len(spans))
	require.NotNil(t, send, "no relay send span among %d spans", len(spans))
	require.NotNil(t, consumer, "no consumer span among %d spans", len(spans))
	assert.Equal(t, server.SpanContext.TraceID(), consumer.SpanContext.TraceID(), "one trace")
	assert.Equal(t, server.SpanContext.SpanID(), send.Parent.SpanID(), "the send is a child of the request span")
	assert.Equal(t, send.SpanContext.SpanID(), consumer.Parent.SpanID(), "the consumer span is a child of the send")
	assert.Equal(t, consumer.SpanContext.SpanID(), consumerCtx.SpanID(), "the handler runs inside the consumer span")
}

// A caller's trace context travels on; its baggage does not (review F21: a client could pad
// every event its request causes with up to 8 KB).
func TestAClientsBaggageIsNotCarriedOn(t *testing.T) {
	in := http.Header{}
	in.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	in.Set("baggage", "pad="+strings.Repeat("x", 100))
	ctx := telemetry.Propagator().Extract(context.Background(), propagation.HeaderCarrier(in))
	out := map[string]string{}
	telemetry.Propagator().Inject(ctx, propagation.MapCarrier(out))
	assert.Equal(t, in.Get("traceparent"), out["traceparent"])
	assert.NotContains(t, out, "baggage")
}

// A caller's tracestate travels on up to telemetry.MaxTraceState bytes; a longer one is
// dropped, the trace kept (review F21: W3C allows 32 members of up to ~512 bytes each, and
// each would be copied into every outbox row the request causes).
func TestALongTraceStateIsNotCarriedOn(t *testing.T) {
	for _, tc := range []struct {
		state string
		kept  bool
	}{
		{"a=" + strings.Repeat("x", 250) + ",b=" + strings.Repeat("y", 256), true},
		{"a=" + strings.Repeat("x", 250) + ",b=" + strings.Repeat("y", 250) + ",c=" + strings.Repeat("z", 250), false},
	} {
		in := http.Header{}
		in.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		in.Set("tracestate", tc.state)
		ctx := telemetry.Propagator().Extract(context.Background(), propagation.HeaderCarrier(in))
		out := map[string]string{}
		telemetry.Propagator().Inject(ctx, propagation.MapCarrier(out))
		assert.Equal(t, in.Get("traceparent"), out["traceparent"], "the trace continues")
		if tc.kept {
			assert.Equal(t, tc.state, out["tracestate"], "%d bytes are carried on", len(tc.state))
		} else {
			assert.NotContains(t, out, "tracestate", "%d bytes are not", len(tc.state))
		}
	}
}
