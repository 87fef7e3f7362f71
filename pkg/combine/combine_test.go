package combine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/combine"
)

func TestEveryCallerGetsItsOwnAnswerAndCallsShareBatches(t *testing.T) {
	var batches, largest atomic.Int64
	release := make(chan struct{})
	b := combine.New(context.Background(), combine.Options{MaxBatch: 50, Flushers: 1},
		func(_ context.Context, reqs []int) []combine.Result[int] {
			if batches.Add(1) == 1 {
				<-release // hold the first batch so the others queue up behind it
			}
			if n := int64(len(reqs)); n > largest.Load() {
				largest.Store(n)
			}
			out := make([]combine.Result[int], len(reqs))
			for i, r := range reqs {
				out[i] = combine.Result[int]{Value: r * 2}
			}
			return out
		})
	defer b.Close()

	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			got, err := b.Do(context.Background(), i)
			assert.NoError(t, err)
			assert.Equal(t, i*2, got)
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, int64(50), largest.Load(), "batches fill up to MaxBatch while a flush runs")
	assert.Less(t, batches.Load(), int64(200), "calls were combined")
}

func TestMaxWaitGathersCallsArrivingLater(t *testing.T) {
	sizes := make(chan int, 10)
	b := combine.New(context.Background(), combine.Options{MaxBatch: 3, MaxWait: time.Second, Flushers: 1},
		func(_ context.Context, reqs []string) []combine.Result[string] {
			sizes <- len(reqs)
			return make([]combine.Result[string], len(reqs))
		})
	defer b.Close()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			_, err := b.Do(context.Background(), "x")
			assert.NoError(t, err)
		})
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	assert.Equal(t, 3, <-sizes, "the first call waited for the two after it")
}

func TestACallerGivingUpDoesNotStopTheBatch(t *testing.T) {
	started, finish := make(chan struct{}), make(chan struct{})
	var ran atomic.Int64
	b := combine.New(context.Background(), combine.Options{Flushers: 1},
		func(ctx context.Context, reqs []int) []combine.Result[int] {
			close(started)
			<-finish
			ran.Add(int64(len(reqs)))
			return make([]combine.Result[int], len(reqs))
		})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Do(ctx, 1)
		errc <- err
	}()
	<-started
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	close(finish)
	b.Close()
	assert.Equal(t, int64(1), ran.Load(), "the batch ran to the end")

	_, err := b.Do(context.Background(), 2)
	assert.ErrorIs(t, err, combine.ErrClosed)
}

func TestFallbackRunsEachRequestAloneWhenTheBatchFails(t *testing.T) {
	batch := func(_ context.Context, reqs []int) ([]combine.Result[int], error) {
		if len(reqs) > 1 {
			return nil, assert.AnError // one bad request fails the batch
		}
		return []combine.Result[int]{{Value: reqs[0]}}, nil
	}
	var order []int
	alone := func(_ context.Context, r int) combine.Result[int] {
		order = append(order, r)
		if r == 2 {
			return combine.Result[int]{Err: assert.AnError}
		}
		return combine.Result[int]{Value: r * 10}
	}
	run := combine.Fallback(batch, alone)
	out := run(context.Background(), []int{1, 2, 3})
	assert.Equal(t, []int{1, 2, 3}, order, "alone, in arrival order")
	assert.Equal(t, 10, out[0].Value)
	assert.ErrorIs(t, out[1].Err, assert.AnError)
	assert.Equal(t, 30, out[2].Value)
	assert.Equal(t, []combine.Result[int]{{Value: 7}}, run(context.Background(), []int{7}))
}

// TestABatchStuckPastItsTimeoutFailsAndTheNextRuns: a batch waiting on something that never
// answers (a database connection whose peer is gone) gets a context that ends at Timeout, so
// it fails and the calls queued behind it run, instead of every later call waiting forever.
func TestABatchStuckPastItsTimeoutFailsAndTheNextRuns(t *testing.T) {
	var runs atomic.Int64
	b := combine.New(context.Background(), combine.Options{Timeout: 100 * time.Millisecond},
		func(ctx context.Context, reqs []int) []combine.Result[int] {
			out := make([]combine.Result[int], len(reqs))
			if runs.Add(1) == 1 {
				<-ctx.Done() // the first batch hangs until its deadline
				for i := range out {
					out[i].Err = ctx.Err()
				}
				return out
			}
			for i, r := range reqs {
				out[i].Value = r
			}
			return out
		})
	defer b.Close()
	_, err := b.Do(context.Background(), 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	got, err := b.Do(context.Background(), 2)
	require.NoError(t, err)
	assert.Equal(t, 2, got)
}
