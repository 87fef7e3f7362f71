package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
)

// httpMetricLabels are the attributes the HTTP server metrics keep (docs/observability.md).
// otelhttp also records server.address (the request's Host header), server.port, url.scheme
// and the protocol: a client choosing its Host header must not be able to mint series.
var httpMetricLabels = attribute.NewAllowKeysFilter("http.route", "http.request.method", "http.response.status_code")

// SetupMetrics installs the global MeterProvider for service and returns the handler of
// GET /metrics, which serves every instrument of the process in the Prometheus text format
// from a registry of its own (not Prometheus' default one, so nothing registered elsewhere in
// the process leaks into it), and a shutdown that flushes and stops the exporters (call it on
// exit, with a deadline). When OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set, the same metrics are also pushed over OTLP/HTTP,
// configured by the standard OTEL_EXPORTER_OTLP_* variables, every OTEL_METRIC_EXPORT_INTERVAL
// (default 60 s).
//
// Instruments may be created before SetupMetrics runs: the global provider forwards them to
// the first provider installed (only the first: a process calls SetupMetrics once).
func SetupMetrics(ctx context.Context, service string) (metrics http.Handler, shutdown func(context.Context) error, err error) {
	if service == "" {
		return nil, nil, errors.New("metrics setup: empty service name")
	}
	res, err := serviceResource(service)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics setup: %w", err)
	}
	reg := prometheus.NewRegistry()
	// Without scope info: the labels of a metric are the attributes the catalogue lists, not
	// otel_scope_name and otel_scope_version on every series.
	prom, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, nil, fmt.Errorf("metrics setup: prometheus exporter: %w", err)
	}
	opts := []sdkmetric.Option{
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(prom),
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Name: "http.server.*"},
			sdkmetric.Stream{
				AttributeFilter:                   httpMetricLabels,
				ExemplarReservoirProviderSelector: withoutDroppedAttributes(sdkmetric.DefaultExemplarReservoirProviderSelector),
			})),
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "" {
		otlp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("metrics setup: otlp exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(otlp)))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	otel.SetMeterProvider(mp)
	metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// A failing observable callback (the database is down) must not hide every other
		// metric: serve what could be collected, the errors are logged by otel's handler.
		ErrorHandling: promhttp.ContinueOnError,
	})
	return metrics, func(ctx context.Context) error {
		if err := mp.Shutdown(ctx); err != nil {
			return fmt.Errorf("metrics shutdown: %w", err)
		}
		return nil
	}, nil
}

// serviceResource is the resource of every signal of a process: the SDK's defaults and
// service.name.
func serviceResource(service string) (*resource.Resource, error) {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		return nil, fmt.Errorf("resource: %w", err)
	}
	return res, nil
}

// withoutDroppedAttributes keeps exemplars (the trace and span of a sampled measurement) but
// not the attributes a view dropped, which the SDK would otherwise attach to them: the
// Prometheus exporter refuses exemplar labels over 128 runes, and the Host header is no more
// welcome in an exemplar than in a label.
func withoutDroppedAttributes(sel sdkmetric.ExemplarReservoirProviderSelector) sdkmetric.ExemplarReservoirProviderSelector {
	return func(agg sdkmetric.Aggregation) exemplar.ReservoirProvider {
		provider := sel(agg)
		return func(attrs attribute.Set) exemplar.Reservoir { return strippedReservoir{provider(attrs)} }
	}
}

type strippedReservoir struct{ exemplar.Reservoir }

func (r strippedReservoir) Offer(ctx context.Context, t time.Time, v exemplar.Value, _ []attribute.KeyValue) {
	r.Reservoir.Offer(ctx, t, v, nil)
}
