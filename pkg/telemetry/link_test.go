package telemetry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stockflow/stockflow/pkg/telemetry"
)

func TestLinkTraceparentLinksASpanOfAnotherTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx := context.Background()
	assert.Empty(t, telemetry.Traceparent(ctx), "no span")

	octx, order := tp.Tracer("test").Start(ctx, "order")
	stored := telemetry.Traceparent(octx)
	require.NotEmpty(t, stored)
	order.End()

	cctx, callback := tp.Tracer("test").Start(ctx, "callback")
	telemetry.LinkTraceparent(cctx, stored, "test")
	telemetry.LinkTraceparent(cctx, "", "test")
	telemetry.LinkTraceparent(cctx, "00-garbage", "test")
	callback.End()

	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	got := spans[1]
	assert.NotEqual(t, order.SpanContext().TraceID(), got.SpanContext.TraceID(), "its own trace")
	require.Len(t, got.Links, 1, "empty and invalid traceparents add nothing")
	assert.Equal(t, order.SpanContext().TraceID(), got.Links[0].SpanContext.TraceID())
	assert.Equal(t, order.SpanContext().SpanID(), got.Links[0].SpanContext.SpanID())
	assert.Equal(t, []attribute.KeyValue{attribute.String(telemetry.LinkAttribute, "test")}, got.Links[0].Attributes)
}

func TestWithTraceparentRoundTrips(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	assert.Equal(t, tp, telemetry.Traceparent(telemetry.WithTraceparent(context.Background(), tp)))
	assert.Empty(t, telemetry.Traceparent(telemetry.WithTraceparent(context.Background(), "garbage")))
}
