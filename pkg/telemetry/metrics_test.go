package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"

	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/pkg/telemetry/metricstest"
)

const requestDuration = "http_server_request_duration_seconds"

// TestHTTPMetricsArePerRoutePattern: the duration histogram is labelled with the pattern of
// the innermost ServeMux that matched (never the raw path), the method and the status; the
// Host header and the like are not labels.
func TestHTTPMetricsArePerRoutePattern(t *testing.T) {
	metricstest.Handler(t)
	inner := http.NewServeMux()
	inner.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	inner.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) })
	outer := http.NewServeMux() // like reconcile.Mount in front of a service's mux
	outer.HandleFunc("POST /v1/admin/reconcile/{job}", func(http.ResponseWriter, *http.Request) {})
	outer.Handle("/", inner)
	srv := httptest.NewServer(telemetry.HTTPHandler(outer, "test"))
	defer srv.Close()

	route := metricstest.Labels{"http_route": "/v1/orders/{id}", "http_request_method": "GET", "http_response_status_code": "418"}
	before := metricstest.Get(t).Value(requestDuration, route)
	for _, id := range []string{"a", "b", "c"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/orders/"+id, nil)
		require.NoError(t, err)
		req.Host = "attacker-" + id + ".example" // must not become a label
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}
	resp, err := http.Post(srv.URL+"/v1/admin/reconcile/outbox", "application/json", nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	resp, err = http.Get(srv.URL + "/no/such/route/12345")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	after := metricstest.Get(t)
	assert.Equal(t, "HISTOGRAM", after.Type(requestDuration))
	assert.Equal(t, before+3, after.Value(requestDuration, route), "three requests to one route: one series, %v", after.Series(requestDuration))
	assert.Equal(t, 1.0, after.Value(requestDuration, metricstest.Labels{"http_route": "/v1/admin/reconcile/{job}"}))
	assert.Equal(t, 1.0, after.Value(requestDuration, metricstest.Labels{"http_route": "/", "http_response_status_code": "404"}),
		"an unknown path counts under its catch-all pattern")
	for _, s := range after.Series(requestDuration) {
		assert.NotContains(t, s, "attacker", "the Host header is no label")
		assert.NotContains(t, s, "12345", "a raw path is no label")
		assert.NotContains(t, s, "server_address")
		assert.NotContains(t, s, "otel_scope", "no scope labels")
	}
	assert.Contains(t, after.Text, `target_info{`, "the resource names the service")
}

// TestSetupMetricsExportsOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, the metrics are also
// pushed to the collector, and shutdown flushes them.
func TestSetupMetricsExportsOverOTLP(t *testing.T) {
	var posts atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/metrics" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	metricstest.Handler(t) // the binary's provider stays the first one: instruments made before go to it
	prev := otel.GetMeterProvider()
	defer otel.SetMeterProvider(prev)

	h, shutdown, err := telemetry.SetupMetrics(context.Background(), "otlp-test")
	require.NoError(t, err)
	c, err := otel.Meter("test").Int64Counter("stockflow.test.pushed")
	require.NoError(t, err)
	c.Add(context.Background(), 2)
	scrape := metricstest.Parse(t, serve(t, h))
	assert.Equal(t, 2.0, scrape.Value("stockflow_test_pushed_total", nil), "also on /metrics")
	require.NoError(t, shutdown(context.Background()))
	assert.GreaterOrEqual(t, posts.Load(), int64(1), "shutdown flushed to the collector")

	_, _, err = telemetry.SetupMetrics(context.Background(), "")
	assert.Error(t, err, "service name required")
}

func serve(t *testing.T, h http.Handler) io.Reader {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body
}
