package natsx_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
)

// setup starts a fresh embedded server with every stream.
func setup(t *testing.T) jetstream.JetStream {
	t.Helper()
	ctx := context.Background()
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))
	return js
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func TestApplyStreamsTwiceIsFine(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1), "second run")

	for _, cfg := range natsx.StreamConfigs(1) {
		s, err := js.Stream(ctx, cfg.Name)
		require.NoError(t, err, cfg.Name)
		info := s.CachedInfo()
		assert.Equal(t, cfg.Subjects, info.Config.Subjects, cfg.Name)
		assert.Equal(t, jetstream.FileStorage, info.Config.Storage, cfg.Name)
		assert.Equal(t, natsx.DuplicateWindow, info.Config.Duplicates, cfg.Name)
		assert.Equal(t, cfg.Name == natsx.StreamSchedules, info.Config.AllowMsgSchedules, cfg.Name)
	}
}

func TestEveryEventSubjectHasAStream(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	for _, subject := range []string{
		events.SubjectOrderCreated, events.SubjectOrderCancelRequested, events.SubjectOrderRefundRequested,
		events.SubjectOrderShipped, events.SubjectPaymentSucceeded, events.SubjectPaymentFailed,
		events.SubjectPaymentRefunded, events.SubjectStockLocked, events.SubjectStockLockRejected,
		events.SubjectStockSold, events.SubjectStockSellFailed, events.SubjectStockReleased,
		events.SubjectStockRestocked, events.SubjectStockShipped, events.SubjectTimeoutExpired,
	} {
		_, err := js.StreamNameBySubject(ctx, subject)
		assert.NoError(t, err, subject)
	}
}

func TestDuplicateMsgIDIsStoredOnce(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	for range 2 {
		_, err := js.Publish(ctx, events.SubjectOrderCreated, []byte("{}"), jetstream.WithMsgID("ev-1"))
		require.NoError(t, err)
	}
	s, err := js.Stream(ctx, natsx.StreamOrder)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.State.Msgs)
}

// publishSchedule publishes orderID's deadline schedule the way the outbox relay does: the
// ScheduleHeaders on the schedule subject.
func publishSchedule(t *testing.T, js jetstream.JetStream, orderID string, at time.Time, body string) {
	t.Helper()
	hdrs, err := natsx.ScheduleHeaders(orderID, at)
	require.NoError(t, err)
	m := nats.NewMsg(natsx.ScheduleSubject(orderID))
	for k, v := range hdrs {
		m.Header.Set(k, v)
	}
	m.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	m.Data = []byte(body)
	_, err = js.PublishMsg(context.Background(), m, jetstream.WithMsgID("schedule:"+orderID))
	require.NoError(t, err)
}

func lastMsg(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.GetLastMsgForSubject(ctx, subject)
}

func TestScheduleFiresAtDeadline(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	at := time.Now().Add(time.Second)
	publishSchedule(t, js, "o-1", at, `{"order_id":"o-1"}`)

	var fired *jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		m, err := lastMsg(ctx, js, natsx.StreamSchedules, natsx.FireSubject("o-1"))
		fired = m
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "schedule did not fire")

	assert.JSONEq(t, `{"order_id":"o-1"}`, string(fired.Data))
	assert.Equal(t, natsx.ScheduleSubject("o-1"), fired.Header.Get(natsx.HeaderScheduler))
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", fired.Header.Get("traceparent"), "headers are carried")
	assert.Empty(t, fired.Header.Get(natsx.HeaderSchedule), "schedule headers are stripped")
	assert.Equal(t, natsx.Retention.String(), fired.Header.Get("Nats-TTL"), "the fired message expires: one subject per order would otherwise keep it for ever")
	assert.False(t, fired.Time.Before(at.Truncate(time.Second)), "fired at %v, before the deadline %v", fired.Time, at)

	// A one-shot schedule removes itself once fired.
	require.Eventually(t, func() bool {
		_, err := lastMsg(ctx, js, natsx.StreamSchedules, natsx.ScheduleSubject("o-1"))
		return errors.Is(err, jetstream.ErrMsgNotFound)
	}, 5*time.Second, 50*time.Millisecond)
}

func TestRescheduleReplacesPendingSchedule(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	publishSchedule(t, js, "o-1", time.Now().Add(time.Hour), `{"v":1}`)
	hdrs, err := natsx.ScheduleHeaders("o-1", time.Now().Add(time.Second))
	require.NoError(t, err)
	m := nats.NewMsg(natsx.ScheduleSubject("o-1"))
	for k, v := range hdrs {
		m.Header.Set(k, v)
	}
	m.Data = []byte(`{"v":2}`)
	_, err = js.PublishMsg(ctx, m, jetstream.WithMsgID("schedule:o-1:2"))
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		m, err := lastMsg(ctx, js, natsx.StreamSchedules, natsx.FireSubject("o-1"))
		return err == nil && string(m.Data) == `{"v":2}`
	}, 10*time.Second, 50*time.Millisecond, "the replacing schedule did not fire")
}

func TestCancelledScheduleDoesNotFire(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	at := time.Now().Add(time.Second)
	publishSchedule(t, js, "cancelled", at, `{}`)
	publishSchedule(t, js, "witness", at.Add(time.Second), `{}`) // fires after "cancelled" would have
	require.NoError(t, natsx.CancelSchedule(ctx, js, "cancelled"))
	require.NoError(t, natsx.CancelSchedule(ctx, js, "never-scheduled"), "cancelling nothing is a no-op")

	require.Eventually(t, func() bool {
		_, err := lastMsg(ctx, js, natsx.StreamSchedules, natsx.FireSubject("witness"))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "witness schedule did not fire")
	_, err := lastMsg(ctx, js, natsx.StreamSchedules, natsx.FireSubject("cancelled"))
	assert.ErrorIs(t, err, jetstream.ErrMsgNotFound, "cancelled schedule fired")
}

func TestScheduleRejectsBadOrderID(t *testing.T) {
	_, err := natsx.ScheduleHeaders("a.b", time.Now())
	assert.Error(t, err)
	assert.Error(t, natsx.CancelSchedule(context.Background(), nil, ">"))
}

func TestRetryDelayGrowsAndIsCapped(t *testing.T) {
	prev := time.Duration(0)
	for n := uint64(1); n <= 30; n++ {
		d := natsx.RetryDelay(n)
		assert.GreaterOrEqual(t, d, prev, "delivery %d", n)
		assert.LessOrEqual(t, d, 10*time.Second, "delivery %d", n)
		prev = d
	}
	assert.Equal(t, 100*time.Millisecond, natsx.RetryDelay(1))
}

// TestRetryAfterNaksWithItsDelay: a message that came early is redelivered once its delay has
// passed, not after RetryDelay's 100ms.
func TestRetryAfterNaksWithItsDelay(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	ack, err := js.Publish(ctx, events.SubjectOrderCreated, []byte(`{"id":"x"}`), jetstream.WithMsgID("early"))
	require.NoError(t, err)

	const wait = 1500 * time.Millisecond
	var seen counter
	var first time.Time
	var second time.Duration
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "early"},
		func(ctx context.Context, msg jetstream.Msg) error {
			if seen.add(msg) == 1 {
				first = time.Now()
				return fmt.Errorf("release: %w", natsx.RetryAfter(errors.New("not yet due"), wait))
			}
			second = time.Since(first)
			return nil
		}, testLogger(t))
	require.NoError(t, err)
	defer stop()

	require.Eventually(t, consumerSettled(t, js, "early", ack.Sequence), 10*time.Second, 20*time.Millisecond)
	stop()
	assert.Equal(t, 2, seen.n(), "deliveries %v", seen.calls)
	assert.GreaterOrEqual(t, second, wait, "redelivered before the delay it asked for")
	assert.Nil(t, natsx.RetryAfter(nil, wait))
	assert.True(t, natsx.IsPermanent(natsx.RetryAfter(natsx.Permanent(errors.New("bad")), wait)), "permanent wins")
}

// TestAHandlerHasAckWaitToRun: the handler's context ends at AckWait — past it the message is
// redelivered anyway — so a handler stuck on a connection that never answers gives its worker
// back and the message is retried.
func TestAHandlerHasAckWaitToRun(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	ack, err := js.Publish(ctx, events.SubjectOrderCreated, []byte(`{"id":"x"}`), jetstream.WithMsgID("stuck"))
	require.NoError(t, err)
	var seen counter
	var deadlines []time.Duration
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "stuck", AckWait: time.Second},
		func(ctx context.Context, msg jetstream.Msg) error {
			if d, ok := ctx.Deadline(); ok {
				deadlines = append(deadlines, time.Until(d))
			}
			if seen.add(msg) == 1 {
				<-ctx.Done() // stuck until the deadline
				return ctx.Err()
			}
			return nil
		}, testLogger(t))
	require.NoError(t, err)
	defer stop()
	require.Eventually(t, consumerSettled(t, js, "stuck", ack.Sequence), 10*time.Second, 20*time.Millisecond)
	stop()
	assert.Equal(t, 2, seen.n(), "stuck once, then handled: deliveries %v", seen.calls)
	require.Len(t, deadlines, 2, "every run has a deadline")
	assert.LessOrEqual(t, deadlines[0], time.Second)
}

// counter records each delivery a handler saw.
type counter struct {
	mu    sync.Mutex
	calls []uint64 // NumDelivered of each call
}

func (c *counter) add(msg jetstream.Msg) uint64 {
	md, _ := msg.Metadata()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, md.NumDelivered)
	return md.NumDelivered
}

func (c *counter) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

func consumerSettled(t *testing.T, js jetstream.JetStream, durable string, seq uint64) func() bool {
	return func() bool {
		c, err := js.Consumer(context.Background(), natsx.StreamOrder, durable)
		if !assert.NoError(t, err) {
			return false
		}
		info, err := c.Info(context.Background())
		return assert.NoError(t, err) && info.AckFloor.Stream >= seq && info.NumAckPending == 0
	}
}

func TestConsumeAckMapping(t *testing.T) {
	errBoom := errors.New("database unavailable")
	tests := []struct {
		name string
		// handle returns the handler's result for a delivery.
		handle         func(numDelivered uint64) error
		maxDeliver     int
		outageMax      int
		wantCalls      int
		wantDeadLetter string // reason header, "" for none
	}{
		{name: "success is acked once", handle: func(uint64) error { return nil }, wantCalls: 1},
		{name: "transient error is redelivered until it succeeds", handle: func(n uint64) error {
			if n < 3 {
				return errBoom
			}
			return nil
		}, wantCalls: 3},
		{name: "permanent error is terminated and dead-lettered", handle: func(uint64) error {
			return natsx.Permanent(errors.New("order total negative"))
		}, wantCalls: 1, wantDeadLetter: "poison"},
		{name: "malformed event is terminated and dead-lettered", handle: func(uint64) error {
			_, _, err := events.Decode[events.OrderCreated]([]byte("not json"))
			return fmt.Errorf("decode: %w", err)
		}, wantCalls: 1, wantDeadLetter: "poison"},
		{name: "transient error on the last delivery is dead-lettered", handle: func(uint64) error {
			return errBoom
		}, maxDeliver: 2, wantCalls: 2, wantDeadLetter: "exhausted"},
		{name: "an outage is retried past MaxDeliver until it ends", handle: func(n uint64) error {
			if n < 4 {
				return natsx.Unavailable(fmt.Errorf("lock: %w", errBoom))
			}
			return nil
		}, maxDeliver: 2, wantCalls: 4},
		{name: "an outage longer than its budget is dead-lettered", handle: func(uint64) error {
			return natsx.Unavailable(errBoom)
		}, maxDeliver: 2, outageMax: 3, wantCalls: 3, wantDeadLetter: "exhausted"},
		{name: "permanent wins over unavailable", handle: func(uint64) error {
			return natsx.Unavailable(natsx.Permanent(errBoom))
		}, wantCalls: 1, wantDeadLetter: "poison"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			js := setup(t)
			msgID := fmt.Sprintf("ev-%d", i)
			ack, err := js.Publish(ctx, events.SubjectOrderCreated, []byte(`{"id":"x"}`), jetstream.WithMsgID(msgID))
			require.NoError(t, err)

			var seen counter
			durable := fmt.Sprintf("c%d", i)
			stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: durable, MaxDeliver: tc.maxDeliver, OutageMaxDeliver: tc.outageMax},
				func(ctx context.Context, msg jetstream.Msg) error { return tc.handle(seen.add(msg)) }, testLogger(t))
			require.NoError(t, err)
			defer stop()

			require.Eventually(t, consumerSettled(t, js, durable, ack.Sequence), 10*time.Second, 20*time.Millisecond,
				"message never acked or terminated")
			stop() // no further deliveries can slip in after this
			assert.Equal(t, tc.wantCalls, seen.n(), "handler calls %v", seen.calls)

			dl, err := lastMsg(ctx, js, natsx.StreamDeadLetter, natsx.SubjectDeadLetterPrefix+events.SubjectOrderCreated)
			if tc.wantDeadLetter == "" {
				assert.ErrorIs(t, err, jetstream.ErrMsgNotFound, "unexpected dead letter")
				return
			}
			require.NoError(t, err, "dead letter missing")
			assert.Equal(t, `{"id":"x"}`, string(dl.Data))
			assert.Equal(t, tc.wantDeadLetter, dl.Header.Get(natsx.HeaderDLReason))
			assert.Equal(t, events.SubjectOrderCreated, dl.Header.Get(natsx.HeaderDLSubject))
			assert.Equal(t, natsx.StreamOrder, dl.Header.Get(natsx.HeaderDLStream))
			assert.Equal(t, fmt.Sprint(ack.Sequence), dl.Header.Get(natsx.HeaderDLStreamSeq))
			assert.Equal(t, durable, dl.Header.Get(natsx.HeaderDLConsumer))
			assert.NotEmpty(t, dl.Header.Get(natsx.HeaderDLError))
		})
	}
}

func TestStopWaitsForRunningHandler(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	ack, err := js.Publish(ctx, events.SubjectOrderCreated, []byte(`{}`), jetstream.WithMsgID("ev"))
	require.NoError(t, err)

	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "drain"},
		func(ctx context.Context, msg jetstream.Msg) error {
			close(started)
			<-release
			finished.Store(true)
			return nil
		}, testLogger(t))
	require.NoError(t, err)
	<-started

	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while the handler was running")
	case <-time.After(100 * time.Millisecond): // not a correctness sleep: a window for stop to misbehave in
	}
	close(release)
	<-stopped
	assert.True(t, finished.Load())
	assert.Eventually(t, consumerSettled(t, js, "drain", ack.Sequence), 5*time.Second, 20*time.Millisecond,
		"the in-flight message was not acked before stop returned")
}

func TestHungLastDeliveryReachesDeadLetterViaAdvisory(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	_, err := js.Publish(ctx, events.SubjectOrderCreated, []byte(`{}`), jetstream.WithMsgID("ev"))
	require.NoError(t, err)

	advisory := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + natsx.StreamOrder + ".hung"
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "hung", MaxDeliver: 1, OutageMaxDeliver: 1, AckWait: time.Second},
		func(context.Context, jetstream.Msg) error {
			// Hang past AckWait, deaf to its context (a handler stuck in a call that takes
			// none), until the server has given up on the message.
			for {
				if _, err := lastMsg(context.Background(), js, natsx.StreamDeadLetter, advisory); err == nil {
					return nil
				}
				time.Sleep(50 * time.Millisecond)
			}
		}, testLogger(t))
	require.NoError(t, err)
	defer stop()
	require.Eventually(t, func() bool {
		_, err := lastMsg(ctx, js, natsx.StreamDeadLetter, advisory)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "no max-deliveries advisory in DEADLETTER")
}

func TestWorkersHandleMessagesConcurrentlyEachOnce(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	const workers, msgs = 4, 40
	var inFlight, peak, handled atomic.Int32
	seen := sync.Map{}
	release := make(chan struct{})
	var releaseOnce sync.Once // after the release, Workers handlers may be in flight at once again
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "workers", Workers: workers},
		func(_ context.Context, m jetstream.Msg) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			if n == workers {
				releaseOnce.Do(func() { close(release) }) // all workers are busy at once: let everyone go
			}
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
			if _, dup := seen.LoadOrStore(string(m.Data()), true); !dup {
				handled.Add(1)
			}
			return nil
		}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer stop()
	for i := range msgs {
		_, err := js.Publish(ctx, "order.created", fmt.Appendf(nil, "m%d", i))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return handled.Load() == msgs }, 15*time.Second, 20*time.Millisecond)
	assert.Equal(t, int32(workers), peak.Load(), "exactly Workers handlers ran at once")
}

// A fired deadline message expires at the TTL its schedule set (HeaderScheduleTTL; the server
// copies it into the fired message's Nats-TTL): each order fires on its own subject, which
// one message per subject never trims.
func TestAFiredScheduleExpiresAtItsTTL(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	hdrs, err := natsx.ScheduleHeaders("o-1", time.Now().Add(time.Second))
	require.NoError(t, err)
	hdrs[natsx.HeaderScheduleTTL] = "1s" // Retention in production
	m := nats.NewMsg(natsx.ScheduleSubject("o-1"))
	for k, v := range hdrs {
		m.Header.Set(k, v)
	}
	_, err = js.PublishMsg(ctx, m)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		_, err := lastMsg(ctx, js, natsx.StreamSchedules, natsx.FireSubject("o-1"))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "schedule did not fire")
	require.Eventually(t, func() bool {
		_, err := lastMsg(ctx, js, natsx.StreamSchedules, natsx.FireSubject("o-1"))
		return errors.Is(err, jetstream.ErrMsgNotFound)
	}, 10*time.Second, 50*time.Millisecond, "the fired message stayed past its TTL")
}

// A SCHEDULES stream from before per-message TTLs refuses the schedules this build publishes:
// a start stops on it until the admin applies the configuration.
func TestSchedulesWithoutMessageTTLsStopAStartUntilApplied(t *testing.T) {
	ctx := context.Background()
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
	require.NoError(t, err)
	defer nc.Close()
	for _, cfg := range natsx.StreamConfigs(1) {
		if cfg.Name == natsx.StreamSchedules {
			cfg.AllowMsgTTL = false
			_, err := js.CreateStream(ctx, cfg)
			require.NoError(t, err)
		}
	}
	_, err = natsx.PrepareStreams(ctx, nc, js, 1)
	require.ErrorIs(t, err, natsx.ErrStreamsNotReady)
	assert.Contains(t, err.Error(), natsx.StreamSchedules+" differs in message TTLs")

	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))
	drifts, err := natsx.CheckStreams(ctx, js, 1)
	require.NoError(t, err)
	assert.Empty(t, drifts)
}

// TestQueuedMessagesAreNotRedeliveredWhileTheyWait is review F18: a consumer prefetched up to
// 64 messages for its workers, and under slow handlers a message could wait in the client's
// buffer past AckWait and be redelivered while still queued (its delivery count climbing
// towards MaxDeliver with no handler failing). Two workers, handlers of 250 ms, AckWait 2 s,
// 24 messages: 3 s of work, so with a deep prefetch the last ones wait longer than AckWait.
func TestQueuedMessagesAreNotRedeliveredWhileTheyWait(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	const msgs = 24
	var handled, redelivered atomic.Int32
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: "slow", Workers: 2, AckWait: 2 * time.Second},
		func(_ context.Context, m jetstream.Msg) error {
			if md, err := m.Metadata(); err == nil && md.NumDelivered > 1 {
				redelivered.Add(1)
			}
			time.Sleep(250 * time.Millisecond)
			handled.Add(1)
			return nil
		}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer stop()
	for i := range msgs {
		_, err := js.Publish(ctx, "order.created", fmt.Appendf(nil, "m%d", i))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return handled.Load() >= msgs }, 30*time.Second, 20*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // a redelivery already on its way is handled too
	assert.Zero(t, redelivered.Load(), "no message was delivered twice")
	assert.Equal(t, int32(msgs), handled.Load())
}
