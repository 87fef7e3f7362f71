// Package metricstest lets a test read the metrics its scenario recorded the way Prometheus
// does: it installs the process's MeterProvider (telemetry.SetupMetrics) once per test binary
// and parses the Prometheus text that the real GET /metrics handler serves.
package metricstest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stockflow/stockflow/pkg/telemetry"
)

var (
	once    sync.Once
	handler http.Handler
	err     error
)

// Handler returns the /metrics handler of the test binary's MeterProvider, installed by the
// first call. Call it before creating the code under test: the global provider hands
// instruments created before it to the first provider installed, and there is one per binary.
func Handler(t testing.TB) http.Handler {
	t.Helper()
	once.Do(func() { handler, _, err = telemetry.SetupMetrics(context.Background(), "test") })
	if err != nil {
		t.Fatalf("metricstest: %v", err)
	}
	return handler
}

// Labels select series: a series matches when it has every label given (and any others).
type Labels map[string]string

// Scrape is one GET /metrics.
type Scrape struct {
	Text     string
	families map[string]*dto.MetricFamily
}

// Get scrapes the handler (installing it first when needed) and parses the answer.
func Get(t testing.TB) Scrape {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler(t).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body.String())
	}
	return Parse(t, rec.Body)
}

// Parse reads Prometheus text.
func Parse(t testing.TB, r io.Reader) Scrape {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("metricstest: read: %v", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("metricstest: parse: %v\n%s", err, b)
	}
	return Scrape{Text: string(b), families: fams}
}

// Value is the sum over the series of family name matching labels: a counter's or a gauge's
// value, a histogram's observation count. It is 0 when none matches (a counter not yet
// incremented has no series).
func (s Scrape) Value(name string, labels Labels) float64 {
	v, _ := s.lookup(name, labels)
	return v
}

// Sum is the sum of the observations of histogram name over the series matching labels.
func (s Scrape) Sum(name string, labels Labels) float64 {
	_, sum := s.lookup(name, labels)
	return sum
}

// Has reports whether family name has a series matching labels.
func (s Scrape) Has(name string, labels Labels) bool {
	f := s.families[name]
	if f == nil {
		return false
	}
	for _, m := range f.GetMetric() {
		if matches(m, labels) {
			return true
		}
	}
	return false
}

// Series lists the label sets of family name, one "k=v,k=v" string each, for failure messages.
func (s Scrape) Series(name string) []string {
	var out []string
	if f := s.families[name]; f != nil {
		for _, m := range f.GetMetric() {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, fmt.Sprintf("%s=%s", l.GetName(), l.GetValue()))
			}
			out = append(out, strings.Join(kv, ","))
		}
	}
	return out
}

// Type is the type of family name ("" when absent): COUNTER, GAUGE, HISTOGRAM.
func (s Scrape) Type(name string) string {
	if f := s.families[name]; f != nil {
		return f.GetType().String()
	}
	return ""
}

func (s Scrape) lookup(name string, labels Labels) (value, sum float64) {
	f := s.families[name]
	if f == nil {
		return 0, 0
	}
	for _, m := range f.GetMetric() {
		if !matches(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			value += m.GetCounter().GetValue()
		case m.Gauge != nil:
			value += m.GetGauge().GetValue()
		case m.Histogram != nil:
			value += float64(m.GetHistogram().GetSampleCount())
			sum += m.GetHistogram().GetSampleSum()
		case m.Untyped != nil:
			value += m.GetUntyped().GetValue()
		}
	}
	return value, sum
}

func matches(m *dto.Metric, labels Labels) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
