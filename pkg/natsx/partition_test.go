package natsx_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
)

func orderCreated(id, sku string) events.OrderCreated {
	return events.OrderCreated{OrderID: id, BuyerID: "u1", Currency: "CNY", Total: 100,
		Items:           []events.OrderItem{{SKU: sku, Qty: 1, UnitPrice: 100}},
		PaymentDeadline: time.Now().Add(time.Hour).UTC()}
}

// partitionOf publishes an order.created of sku and returns the partition the ORDER stream
// stored it in.
func partitionOf(t *testing.T, js jetstream.JetStream, id, sku string) string {
	t.Helper()
	_, seq := publishEvent(t, js, orderCreated(id, sku))
	s, err := js.Stream(context.Background(), natsx.StreamOrder)
	require.NoError(t, err)
	m, err := s.GetMsg(context.Background(), seq)
	require.NoError(t, err)
	tokens := strings.Split(m.Subject, ".")
	require.Len(t, tokens, 4, "order.created.<partition>.<key>: %s", m.Subject)
	assert.Equal(t, events.SubjectKey(sku), tokens[3], "the key survives the mapping")
	return tokens[2]
}

func TestTheStreamPutsEveryOrderOfOneSKUInOnePartition(t *testing.T) {
	js := setup(t)
	seen := map[string]bool{}
	for i := range 40 {
		sku := fmt.Sprintf("SKU-%d", i)
		first := partitionOf(t, js, fmt.Sprintf("o-%d-a", i), sku)
		assert.Equal(t, first, partitionOf(t, js, fmt.Sprintf("o-%d-b", i), sku), sku)
		seen[first] = true
	}
	// 40 keys over 8 partitions: a hash that sends them all to a few would show here.
	assert.GreaterOrEqual(t, len(seen), natsx.OrderCreatedPartitions-2, "partitions used: %v", seen)
}

// pinnedClient consumes partition p's consumer as one replica does and records the order ids
// it handled.
type pinnedClient struct {
	mu    sync.Mutex
	got   []string
	stop  func()
	crash func() // the connection closes under the consumer, as when the process dies
}

// ids are the order ids handled, of those whose id starts with prefix.
func (c *pinnedClient) ids(prefix string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, id := range c.got {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	return out
}

func startPinned(t *testing.T, url, name string, spec natsx.ConsumerSpec) *pinnedClient {
	t.Helper()
	nc, js, err := natsx.Connect(context.Background(), url, name)
	require.NoError(t, err)
	c := &pinnedClient{crash: nc.Close}
	c.stop, err = natsx.Consume(context.Background(), js, spec,
		natsx.On(spec.Durable, natsx.Errors{}, func(_ context.Context, _ inbox.Message, ev events.OrderCreated) error {
			c.mu.Lock()
			c.got = append(c.got, ev.OrderID)
			c.mu.Unlock()
			return nil
		}), testLogger(t))
	require.NoError(t, err)
	t.Cleanup(c.stop)
	return c
}

func TestAPinnedConsumerFeedsOneReplicaAndMovesWhenItStops(t *testing.T) {
	url := natstest.Start(t)
	ctx := context.Background()
	nc, js, err := natsx.Connect(ctx, url, t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))

	p := partitionOf(t, js, "warm-up", "HOT-1")
	var part int
	_, err = fmt.Sscan(p, &part)
	require.NoError(t, err)
	spec := natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "pinned", PriorityGroup: "stock",
		FilterSubjects: []string{natsx.OrderCreatedPartition(part)}, Workers: 4}
	a := startPinned(t, url, "replica-a", spec)
	b := startPinned(t, url, "replica-b", spec)

	publish := func(prefix string, n int) {
		for i := range n {
			publishEvent(t, js, orderCreated(fmt.Sprintf("%s-%d", prefix, i), "HOT-1"))
		}
	}
	// (b's start took the pin from a, if a had it: a starting replica unpins, see below.)
	publish("first-", 50)
	require.Eventually(t, func() bool { return len(a.ids("first-"))+len(b.ids("first-")) == 50 }, 10*time.Second, 20*time.Millisecond)
	pinned, other := a, b
	if len(b.ids("first-")) > 0 {
		pinned, other = b, a
	}
	assert.Empty(t, other.ids("first-"), "one replica at a time gets the partition")

	pinned.stop() // a rolling restart: the stopping replica hands the partition over (unpin)
	start := time.Now()
	publish("second-", 50)
	require.Eventually(t, func() bool { return len(other.ids("second-")) == 50 }, natsx.PinnedTTL/2, 20*time.Millisecond,
		"the other replica takes the partition over well before the pinned TTL")
	t.Logf("partition moved to the other replica within %s", time.Since(start).Round(time.Millisecond))

	// The other replica crashes: its connection is gone, but the server keeps its pin until
	// PinnedTTL. The replica that starts after it unpins and gets the partition at once.
	other.crash()
	c := startPinned(t, url, "replica-c", spec)
	start = time.Now()
	publish("third-", 50)
	require.Eventually(t, func() bool { return len(c.ids("third-")) == 50 }, natsx.PinnedTTL/2, 20*time.Millisecond,
		"a replica starting after a crash gets the partition well before the pinned TTL")
	t.Logf("partition moved to the replica started after the crash within %s", time.Since(start).Round(time.Millisecond))
}
