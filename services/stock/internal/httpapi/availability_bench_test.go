package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkAvailability is the storefront read over a real listener: parallel clients ask for
// 20 SKUs each (a category page) out of a catalogue of 10^5 (two slots each), while the read
// model refreshes every TTL: the default 5 s, and the shortest allowed, 100 ms, where refreshes
// overlap the load all the time. It reports requests per second, the database queries per
// refresh (at most 1; below 1 when the refresh the stop interrupts ends before its query) and
// what one refresh of the 10^5 SKUs takes.
func BenchmarkAvailability(b *testing.B) {
	for _, ttl := range []time.Duration{5 * time.Second, 100 * time.Millisecond} {
		b.Run("ttl="+ttl.String(), func(b *testing.B) { benchmarkAvailability(b, ttl) })
	}
}

func benchmarkAvailability(b *testing.B, ttl time.Duration) {
	const catalogue, perPage = 100_000, 20
	s := newStorefront(b, ttl)
	_, err := s.pool.Exec(context.Background(), seedSKUs, catalogue)
	require.NoError(b, err)

	// What one refresh costs, measured apart from the load.
	const timed = 5
	start := time.Now()
	for range timed {
		require.NoError(b, s.avail.Refresh(context.Background()))
	}
	refreshMS := float64(time.Since(start).Milliseconds()) / timed

	pages := make([]string, 1000)
	for i := range pages {
		skus, first := make([]string, perPage), rand.IntN(catalogue)
		for j := range skus { // 20 different SKUs, spread over the catalogue
			skus[j] = fmt.Sprintf("SEED-%d", (first+j*4999)%catalogue+1)
		}
		pages[i] = "sku=" + strings.Join(skus, ",")
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	b.Cleanup(client.CloseIdleConnections)

	queries0, refreshes0 := s.queries.n.Load(), s.refreshes(b)
	stop := s.run()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(pages))
		for pb.Next() {
			i = (i + 1) % len(pages)
			status, _, body := s.get(b, client, pages[i])
			if status != http.StatusOK || len(body.SKUs) != perPage {
				b.Errorf("status %d, %d skus", status, len(body.SKUs))
				return
			}
		}
	})
	b.StopTimer()
	stop() // the refresh it interrupts counts as failed, with or without its query
	queries, refreshes := s.queries.n.Load()-queries0, s.refreshes(b)-refreshes0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(refreshes), "refreshes")
	b.ReportMetric(float64(queries)/float64(max(refreshes, 1)), "queries/refresh")
	b.ReportMetric(refreshMS, "ms/refresh")
}
