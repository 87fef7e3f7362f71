package outbox

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/telemetry"
)

// traceScope names the relay's tracer.
const traceScope = "github.com/stockflow/stockflow/pkg/outbox"

// startSend starts the producer span of publishing x: a child of the span that wrote the row
// (the trace context Write stored in its headers), whose own context then replaces the
// writer's in h, so the consumer's span is a child of the send and the trace shows the hop
// through the outbox, the relay's delay included. A row written outside any trace gets a
// non-recording span and its headers stay as they are: the relay starts no trace of its own.
func startSend(ctx context.Context, x row, h nats.Header) trace.Span {
	parent := telemetry.ExtractMap(ctx, x.headers)
	if !trace.SpanContextFromContext(parent).IsValid() {
		return trace.SpanFromContext(ctx) // ctx carries no span: a no-op one
	}
	template := events.SubjectTemplate(x.subject)
	sctx, span := otel.Tracer(traceScope).Start(parent, "send "+template,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", x.subject),
			attribute.String("messaging.destination.template", template),
			attribute.String("messaging.message.id", x.eventID),
		))
	telemetry.InjectNATS(sctx, h)
	return span
}

// endSend ends the span of a publish that JetStream acknowledged (err nil) or refused.
func endSend(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
