package flashsale

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The metrics the sale reads from stock's GET /metrics (docs/observability.md).
const (
	metricLockOutcomes = "stockflow_stock_lock_outcomes_total"
	metricBatchSize    = "stockflow_combine_batch_size"
	metricConsumerLag  = "stockflow_messaging_consumer_lag"
	lockBatcher        = "lock"
	lockConsumer       = "stock-order-created"
)

// MetricFigures is what stock's own metrics say about the sale: the lock outcomes and the
// lock batches while it ran (differences of two scrapes), and the deepest the order.created
// consumer fell behind (the peak of the samples). The checks hold them against the ledger.
type MetricFigures struct {
	Read          bool    // both scrapes answered
	Err           string  // why not
	Locked        int64   // stockflow_stock_lock_outcomes_total{outcome="locked"}, increase
	Rejected      int64   // ... {outcome="rejected"}, increase
	LockBatches   int64   // stockflow_combine_batch_size{batcher="lock"} count, increase
	LockBatchMean float64 // its sum over its count, for the sale
	LagPeak       int64   // max of stockflow_messaging_consumer_lag summed over stock's order.created consumers
}

// stockMetrics is one scrape of the figures MetricFigures is made of.
type stockMetrics struct {
	locked, rejected float64
	batches, batched float64
	lag              float64
}

func (c *Client) stockMetrics(ctx context.Context) (stockMetrics, error) {
	fams, err := c.scrape(ctx, "stock", c.stockURL)
	if err != nil {
		return stockMetrics{}, err
	}
	var m stockMetrics
	for _, s := range fams[metricLockOutcomes].GetMetric() {
		switch label(s, "outcome") {
		case "locked":
			m.locked += s.GetCounter().GetValue()
		case "rejected":
			m.rejected += s.GetCounter().GetValue()
		}
	}
	for _, s := range fams[metricBatchSize].GetMetric() {
		if label(s, "batcher") == lockBatcher {
			m.batches += float64(s.GetHistogram().GetSampleCount())
			m.batched += s.GetHistogram().GetSampleSum()
		}
	}
	// order.created is consumed per partition (stock-order-created-p<n>) and, for older
	// producers, unpartitioned (stock-order-created): its lag is theirs together.
	for _, s := range fams[metricConsumerLag].GetMetric() {
		if c := label(s, "consumer"); c == lockConsumer || strings.HasPrefix(c, lockConsumer+"-p") {
			m.lag += s.GetGauge().GetValue()
		}
	}
	return m, nil
}

// scrape reads the metric families of the service who at base's GET /metrics.
func (c *Client) scrape(ctx context.Context, who, base string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s /metrics: %w", who, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s /metrics: %s", who, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s /metrics: %w", who, err)
	}
	return fams, nil
}

// GateVerdicts is the order service's stockflow_order_gate_total by verdict (admitted,
// sold_out, sold_out_cached, open, bypassed). Behind a front of several replicas it is the
// one replica's that answered.
func (c *Client) GateVerdicts(ctx context.Context) (map[string]float64, error) {
	fams, err := c.scrape(ctx, "order", c.orderURL)
	if err != nil {
		return nil, err
	}
	v := map[string]float64{}
	for _, s := range fams["stockflow_order_gate_total"].GetMetric() {
		v[label(s, "verdict")] += s.GetCounter().GetValue()
	}
	return v, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// metricDelta is what changed from before to after, with the lag peak of the samples.
func metricDelta(before, after stockMetrics, lagPeak float64) MetricFigures {
	f := MetricFigures{Read: true,
		Locked: int64(after.locked - before.locked), Rejected: int64(after.rejected - before.rejected),
		LockBatches: int64(after.batches - before.batches), LagPeak: int64(max(lagPeak, after.lag))}
	if f.LockBatches > 0 {
		f.LockBatchMean = (after.batched - before.batched) / (after.batches - before.batches)
	}
	return f
}

func (f MetricFigures) String() string {
	if !f.Read {
		return "stock's /metrics not read: " + f.Err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "locks +%d, rejections +%d; %d lock batches, %.1f orders each on average; order.created lag peak %d",
		f.Locked, f.Rejected, f.LockBatches, f.LockBatchMean, f.LagPeak)
	return b.String()
}
