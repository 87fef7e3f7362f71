package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stockflow/stockflow/pkg/telemetry"
)

func TestLogHandlerAddsTheSpanOfTheContext(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("service", "test")
	line := func() map[string]any {
		t.Helper()
		var m map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &m), "%s", buf.Bytes())
		buf.Reset()
		return m
	}

	ctx, span := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "request")
	defer span.End()
	log.InfoContext(ctx, "inside", "k", "v")
	got := line()
	assert.Equal(t, span.SpanContext().TraceID().String(), got[telemetry.LogTraceID])
	assert.Equal(t, span.SpanContext().SpanID().String(), got[telemetry.LogSpanID])
	assert.Equal(t, "v", got["k"])
	assert.Equal(t, "test", got["service"], "attributes of With are kept")

	log.With("component", "x").InfoContext(ctx, "derived logger")
	got = line()
	assert.Equal(t, span.SpanContext().TraceID().String(), got[telemetry.LogTraceID], "With keeps the wrapper")
	assert.Equal(t, "x", got["component"])

	for name, ctx := range map[string]context.Context{"no span": context.Background(), "no context": nil} {
		if ctx == nil {
			log.Info("outside")
		} else {
			log.InfoContext(ctx, "outside")
		}
		got = line()
		assert.NotContains(t, got, telemetry.LogTraceID, name)
		assert.NotContains(t, got, telemetry.LogSpanID, name)
	}
}

func TestLogHandlerWrapsOnce(t *testing.T) {
	h := telemetry.LogHandler(slog.DiscardHandler)
	assert.Equal(t, h, telemetry.LogHandler(h))
}
