// Package telemetry sets up OpenTelemetry tracing for a stockflow process and carries trace
// context across the places a request leaves the process: HTTP (via otelhttp), the outbox
// headers and NATS message headers. One trace follows an order from the API call that
// created it through every consumer that reacted to its events.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Setup installs the global TracerProvider for service and the W3C TraceContext propagator, and returns a shutdown that flushes pending spans (call it on exit, with a
// deadline). Spans go to exp; when exp is nil they go to an OTLP/HTTP exporter configured by
// the standard OTEL_EXPORTER_OTLP_* variables if OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and nowhere otherwise. With nowhere to go a span
// is not recorded (a new trace is not sampled, unless OTEL_TRACES_SAMPLER says otherwise) but
// still has its ids, so trace ids still propagate through headers and logs; recording spans
// only to drop them cost the order service ~6 % of its CPU in a storm.
//
// Setup reads the environment only for the OTLP exporter, whose configuration is the
// OpenTelemetry standard rather than a stockflow setting.
func Setup(ctx context.Context, service string, exp sdktrace.SpanExporter) (shutdown func(context.Context) error, err error) {
	if service == "" {
		return nil, errors.New("telemetry setup: empty service name")
	}
	if exp == nil && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		otlp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry setup: otlp exporter: %w", err)
		}
		exp = otlp
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		return nil, fmt.Errorf("telemetry setup: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	switch {
	case exp != nil:
		opts = append(opts, sdktrace.WithBatcher(exp))
	case os.Getenv("OTEL_TRACES_SAMPLER") == "":
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	return func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("telemetry shutdown: %w", err)
		}
		return nil
	}, nil
}

// Propagator is the propagator stockflow uses everywhere: W3C traceparent and tracestate.
// Setup installs it globally. Baggage is not propagated: nothing here reads it, and a client's
// baggage header (up to 8 KB) would be copied into every outbox row and message its request
// causes. For the same reason a tracestate longer than MaxTraceState is dropped where it is
// read (review F21); the trace itself continues.
func Propagator() propagation.TextMapPropagator { return traceContext{} }

// MaxTraceState is the longest tracestate carried on: the 512 characters W3C Trace Context
// asks every participant to propagate at least.
const MaxTraceState = 512

// traceContext is W3C Trace Context that reads no tracestate longer than MaxTraceState.
type traceContext struct{ propagation.TraceContext }

// Extract implements propagation.TextMapPropagator.
func (p traceContext) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	if len(carrier.Get("tracestate")) > MaxTraceState {
		carrier = withoutTraceState{carrier}
	}
	return p.TraceContext.Extract(ctx, carrier)
}

// withoutTraceState is a carrier whose tracestate reads as absent.
type withoutTraceState struct{ propagation.TextMapCarrier }

func (c withoutTraceState) Get(key string) string {
	if key == "tracestate" {
		return ""
	}
	return c.TextMapCarrier.Get(key)
}

// HTTPHandler wraps h so every request runs in a server span named after the route pattern
// that served it ("POST /v1/orders"; operation, the service's name, until a mux has matched),
// continuing the trace of an incoming traceparent header when there is one, with otelhttp's
// standard HTTP attributes and metrics.
func HTTPHandler(h http.Handler, operation string) http.Handler {
	return otelhttp.NewHandler(h, operation, otelhttp.WithSpanNameFormatter(spanName))
}

// spanName is the route pattern, never the raw path (one name per route, not per order).
func spanName(operation string, r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	return operation
}

// HeaderCarrier adapts NATS message headers to a propagation.TextMapCarrier. NATS header keys
// are case-sensitive; the W3C propagator writes and reads lower-case keys ("traceparent").
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key.
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces the values of key with value.
func (c HeaderCarrier) Set(key, value string) { c[key] = []string{value} }

// Keys lists the header keys.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// InjectNATS writes the trace context of ctx into h using the global propagator. h must not be
// nil.
func InjectNATS(ctx context.Context, h nats.Header) {
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(h))
}

// ExtractNATS returns ctx carrying the remote trace context found in h (if any), so a span
// started from it becomes a child of the producer's span.
func ExtractNATS(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(h))
}

// InjectMap writes the trace context of ctx into m (the outbox stores headers as a map).
func InjectMap(ctx context.Context, m map[string]string) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(m))
}

// Traceparent returns the W3C traceparent of ctx's span ("" outside a span): stored with a
// record whose later handling starts a trace of its own (a provider's callback), it lets that
// trace link back to this one (LinkTraceparent).
func Traceparent(ctx context.Context) string {
	m := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, m)
	return m.Get("traceparent")
}

// WithTraceparent returns ctx carrying, as its remote parent, the span traceparent names (as
// Traceparent returned it); ctx itself when traceparent is empty or invalid.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// LinkAttribute is the link attribute saying why LinkTraceparent linked two spans.
const LinkAttribute = "stockflow.link"

// LinkTraceparent adds to ctx's span a link to the span traceparent names (as Traceparent
// returned it), with attribute stockflow.link = why (say "order.created"). An empty or invalid
// traceparent adds nothing. A link, not a parent: the span stays in its own trace, and a
// backend shows the two traces as related.
func LinkTraceparent(ctx context.Context, traceparent, why string) {
	if traceparent == "" {
		return
	}
	sc := trace.SpanContextFromContext(WithTraceparent(context.Background(), traceparent))
	if !sc.IsValid() {
		return
	}
	trace.SpanFromContext(ctx).AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String(LinkAttribute, why)}})
}

// ExtractMap returns ctx carrying the remote trace context found in m (the outbox's stored
// headers), as ExtractNATS does for message headers.
func ExtractMap(ctx context.Context, m map[string]string) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(m))
}
