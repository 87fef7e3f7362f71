package natsx_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/telemetry"
)

// logBuffer collects the JSON lines of a logger written from the consumer's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// find returns the lines whose msg is msg and whose event_id is id.
func (b *logBuffer) find(t *testing.T, msg, id string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "every line is JSON: %s", sc.Bytes())
		if line["msg"] == msg && line["event_id"] == id {
			out = append(out, line)
		}
	}
	return out
}

// TestConsumeLogsEachMessageWithItsEventAndTrace: one debug line per handled message with the
// subject, stream sequence, delivery, event id, outcome and duration, inside the consumer span
// (trace_id of the producer's trace); an error line names the event even when the body is not
// an envelope (its Nats-Msg-Id).
func TestConsumeLogsEachMessageWithItsEventAndTrace(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(telemetry.Propagator())
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	ctx := context.Background()
	js := setup(t)
	var out logBuffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))

	pctx, producer := tp.Tracer("test").Start(ctx, "produce")
	good, err := events.Encode(events.StockSold{OrderID: "o-log"}, time.Now())
	require.NoError(t, err)
	publish := func(id string, data []byte) uint64 {
		m := nats.NewMsg(events.SubjectStockSold)
		m.Data = data
		telemetry.InjectNATS(pctx, m.Header)
		ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(id))
		require.NoError(t, err)
		return ack.Sequence
	}
	goodSeq := publish(good.ID, good.Data)
	publish("poison-1", []byte("not an envelope"))
	producer.End()

	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamStock, Durable: "log-test", FilterSubjects: []string{events.SubjectStockSold}},
		func(_ context.Context, msg jetstream.Msg) error {
			if _, err := events.Open(msg.Data()); err != nil {
				return err // malformed: poison
			}
			return nil
		}, log)
	require.NoError(t, err)
	defer stop()

	var handled []map[string]any
	require.Eventually(t, func() bool {
		handled = append(out.find(t, "message handled", good.ID), out.find(t, "message handled", "poison-1")...)
		return len(handled) == 2
	}, 10*time.Second, 20*time.Millisecond, "one debug line per message")

	line := handled[0]
	assert.Equal(t, "DEBUG", line["level"])
	assert.Equal(t, events.SubjectStockSold, line["subject"])
	assert.Equal(t, float64(goodSeq), line["stream_seq"])
	assert.Equal(t, float64(1), line["delivery"])
	assert.Equal(t, "ack", line["outcome"])
	assert.Contains(t, line, "duration_ms")
	assert.Equal(t, producer.SpanContext().TraceID().String(), line[telemetry.LogTraceID], "the producer's trace")
	assert.NotEmpty(t, line[telemetry.LogSpanID])
	assert.NotEqual(t, producer.SpanContext().SpanID().String(), line[telemetry.LogSpanID], "the consumer's own span")

	assert.Equal(t, "term", handled[1]["outcome"])
	dead := out.find(t, "message dead-lettered and terminated", "poison-1")
	require.Len(t, dead, 1, "the error line names the event by its Nats-Msg-Id")
	assert.Equal(t, "ERROR", dead[0]["level"])
	assert.Equal(t, producer.SpanContext().TraceID().String(), dead[0][telemetry.LogTraceID])
	assert.Contains(t, fmt.Sprint(dead[0]["err"]), "malformed")
}
