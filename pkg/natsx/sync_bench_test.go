package natsx_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
)

// BenchmarkPublishSync is the broker's share of what sync_interval: always costs: an embedded
// nats-server with its file store in a temporary directory, fsync before every ack (always) or
// every 2 minutes (nats-server's default), and the streams as ApplyStreams makes them. Each op
// is one message, published the way the outbox relay does: a window of PublishMsgAsync with a
// Nats-Msg-Id each, then a wait for all of the window's acks. window=1 is a lone event, 256 a
// full relay batch (the server still fsyncs each message, not each window). Client and server
// share the process and the cores, so msgs/s is an upper bound for one relay on one stream.
//
//	go test -run '^$' -bench PublishSync -benchtime 1000x -count 3 ./pkg/natsx/
func BenchmarkPublishSync(b *testing.B) {
	payload := []byte(`{"event_id":"0194e7a2-7c1d-7b3e-9f00-000000000001","order_id":"o-0001","lines":[{"sku":"SKU-1","quantity":1}],"at":"2026-12-05T08:00:00Z"}`)
	for _, sync := range []struct {
		name  string
		start func(testing.TB) string
	}{{"always", natstest.StartSyncAlways}, {"2m", natstest.Start}} {
		for _, window := range []int{1, 256} {
			b.Run(fmt.Sprintf("sync=%s/window=%d", sync.name, window), func(b *testing.B) {
				ctx := context.Background()
				nc, js, err := natsx.Connect(ctx, sync.start(b), b.Name())
				require.NoError(b, err)
				b.Cleanup(nc.Close)
				require.NoError(b, natsx.ApplyStreams(ctx, js, 1))
				futures := make([]jetstream.PubAckFuture, 0, window)
				b.ResetTimer()
				for sent := 0; sent < b.N; {
					futures = futures[:0]
					for ; len(futures) < window && sent < b.N; sent++ {
						m := nats.NewMsg(events.SubjectStockLocked)
						m.Data = payload
						f, err := js.PublishMsgAsync(m, jetstream.WithMsgID(fmt.Sprintf("bench-%d", sent)))
						require.NoError(b, err)
						futures = append(futures, f)
					}
					for _, f := range futures {
						select {
						case <-f.Ok():
						case err := <-f.Err():
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}
