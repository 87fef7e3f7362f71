package combine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/telemetry/metricstest"
)

// TestBatchSizeAndFlushDurationAreRecordedPerBatcher: three calls held behind a first batch
// form one batch of three; /metrics shows both batches under the batcher's name.
func TestBatchSizeAndFlushDurationAreRecordedPerBatcher(t *testing.T) {
	metricstest.Handler(t)
	label := metricstest.Labels{"batcher": "metrics-test"}
	release := make(chan struct{})
	first := true
	b := combine.New(context.Background(), combine.Options{Name: "metrics-test"},
		func(_ context.Context, reqs []int) []combine.Result[int] {
			if first {
				first = false
				<-release
			}
			time.Sleep(2 * time.Millisecond)
			return make([]combine.Result[int], len(reqs))
		})
	defer b.Close()

	var wg sync.WaitGroup
	wg.Go(func() { _, err := b.Do(context.Background(), 0); assert.NoError(t, err) })
	time.Sleep(20 * time.Millisecond) // the first call is in its batch, held
	for i := 1; i <= 3; i++ {
		wg.Go(func() { _, err := b.Do(context.Background(), i); assert.NoError(t, err) })
	}
	time.Sleep(20 * time.Millisecond) // the three queue up behind it
	close(release)
	wg.Wait()

	s := metricstest.Get(t)
	require.Equal(t, "HISTOGRAM", s.Type("stockflow_combine_batch_size"), s.Text)
	assert.Equal(t, 2.0, s.Value("stockflow_combine_batch_size", label), "two batches")
	assert.Equal(t, 4.0, s.Sum("stockflow_combine_batch_size", label), "of 1 and 3 requests")
	assert.Contains(t, s.Text, `stockflow_combine_batch_size_bucket{batcher="metrics-test",le="1"} 1`)
	assert.Contains(t, s.Text, `stockflow_combine_batch_size_bucket{batcher="metrics-test",le="4"} 2`)
	assert.Equal(t, "HISTOGRAM", s.Type("stockflow_combine_flush_duration_seconds"))
	assert.Equal(t, 2.0, s.Value("stockflow_combine_flush_duration_seconds", label))
	assert.Greater(t, s.Sum("stockflow_combine_flush_duration_seconds", label), 0.004, "each flush slept 2ms")
	assert.Zero(t, s.Value("stockflow_combine_batch_size", metricstest.Labels{"batcher": "unnamed"}))
}
