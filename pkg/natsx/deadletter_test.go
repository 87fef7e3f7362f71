package natsx_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
)

// poison runs a consumer whose handler terminates every message, publishes one message on
// subject with a trace-like header and waits until it is dead-lettered.
func poison(t *testing.T, js jetstream.JetStream, durable, subject, body string) {
	t.Helper()
	ctx := context.Background()
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: durable, FilterSubjects: []string{subject}},
		func(context.Context, jetstream.Msg) error { return natsx.Permanent(errors.New("no such sku")) }, testLogger(t))
	require.NoError(t, err)
	defer stop()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	m.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	_, err = js.PublishMsg(ctx, m, jetstream.WithMsgID("ev-"+durable))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l, err := natsx.ListDeadLetters(ctx, js, natsx.DeadLetterFilter{Consumers: []string{durable}})
		return err == nil && len(l.DeadLetters) == 1
	}, 10*time.Second, 20*time.Millisecond, "not dead-lettered")
}

func TestDeadLettersAreListedShownAndReplayedToTheHandler(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	poison(t, js, "first", events.SubjectOrderCreated, `{"a":1}`)
	poison(t, js, "second", events.SubjectOrderShipped, `{"b":2}`)

	all, err := natsx.ListDeadLetters(ctx, js, natsx.DeadLetterFilter{})
	require.NoError(t, err)
	require.Len(t, all.DeadLetters, 2)
	assert.Equal(t, 2, all.Scanned)
	assert.False(t, all.Truncated)
	assert.Equal(t, []string{"first", "second"}, []string{all.DeadLetters[0].Consumer, all.DeadLetters[1].Consumer}, "oldest first")

	bySubject, err := natsx.ListDeadLetters(ctx, js, natsx.DeadLetterFilter{Subject: events.SubjectOrderShipped})
	require.NoError(t, err)
	require.Len(t, bySubject.DeadLetters, 1)
	assert.Equal(t, "second", bySubject.DeadLetters[0].Consumer)

	listed := all.DeadLetters[0]
	assert.Empty(t, listed.Data, "list reads headers only")
	dl, err := natsx.GetDeadLetter(ctx, js, listed.Seq)
	require.NoError(t, err)
	assert.Equal(t, natsx.KindCopy, dl.Kind)
	assert.Equal(t, events.SubjectOrderCreated, dl.Subject)
	assert.Equal(t, natsx.StreamOrder, dl.Stream)
	assert.Equal(t, uint64(1), dl.StreamSeq)
	assert.Equal(t, "first", dl.Consumer)
	assert.Equal(t, uint64(1), dl.Deliveries)
	assert.Equal(t, "poison", dl.Reason)
	assert.Contains(t, dl.Error, "no such sku")
	assert.Equal(t, `{"a":1}`, string(dl.Data))
	assert.WithinDuration(t, time.Now(), dl.Time, time.Minute)

	var mu sync.Mutex
	var got []jetstream.Msg
	h := func(_ context.Context, m jetstream.Msg) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m)
		return nil
	}
	require.NoError(t, natsx.Replay(ctx, h, dl))
	require.Len(t, got, 1)
	m := got[0]
	assert.Equal(t, events.SubjectOrderCreated, m.Subject())
	assert.Equal(t, `{"a":1}`, string(m.Data()))
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", m.Headers().Get("Traceparent"), "the original's headers")
	assert.Empty(t, m.Headers().Get(natsx.HeaderDLConsumer), "not the dead letter's")
	assert.Empty(t, m.Headers().Get(jetstream.MsgIDHeader), "not the dead letter's dl:… id")
	assert.Equal(t, "1", m.Headers().Get(natsx.HeaderReplayOf))
	md, err := m.Metadata()
	require.NoError(t, err)
	assert.Equal(t, natsx.StreamOrder, md.Stream)
	assert.Equal(t, "first", md.Consumer)
	assert.Equal(t, uint64(1), md.Sequence.Stream)
	assert.Error(t, m.Ack(), "a replay is not a delivery")

	handlerErr := errors.New("still broken")
	assert.ErrorIs(t, natsx.Replay(ctx, func(context.Context, jetstream.Msg) error { return handlerErr }, dl), handlerErr)
	assert.ErrorIs(t, natsx.Replay(ctx, h, listed), natsx.ErrNotReplayable, "headers only: no body to replay")

	dls, err := natsx.ListDeadLetters(ctx, js, natsx.DeadLetterFilter{})
	require.NoError(t, err)
	assert.Len(t, dls.DeadLetters, 2, "a replay deletes nothing")
}

// TestTwoConsumersGivingUpOnOneMessageAreTwoDeadLetters: stock and payment-adapter both
// consume order.created; each one's dead letter of the same message is kept.
func TestTwoConsumersGivingUpOnOneMessageAreTwoDeadLetters(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	fail := func(context.Context, jetstream.Msg) error { return natsx.Permanent(errors.New("no")) }
	for _, durable := range []string{"stock-order-created", "payment-adapter-order-created"} {
		stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: durable, FilterSubjects: []string{events.SubjectOrderCreated}}, fail, testLogger(t))
		require.NoError(t, err)
		t.Cleanup(stop)
	}
	_, err := js.Publish(ctx, events.SubjectOrderCreated, []byte(`{"a":1}`), jetstream.WithMsgID("ev-shared"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l, err := natsx.ListDeadLetters(ctx, js, natsx.DeadLetterFilter{})
		return err == nil && len(l.DeadLetters) == 2
	}, 10*time.Second, 20*time.Millisecond, "one dead letter per consumer")
}

func TestGetDeadLetterOfAnUnknownSequence(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	for _, seq := range []uint64{0, 1, 99} {
		_, err := natsx.GetDeadLetter(ctx, js, seq)
		assert.ErrorIs(t, err, natsx.ErrDeadLetterNotFound, "seq %d of an empty stream", seq)
	}
	poison(t, js, "only", events.SubjectOrderCreated, `{}`)
	_, err := natsx.GetDeadLetter(ctx, js, 2)
	assert.ErrorIs(t, err, natsx.ErrDeadLetterNotFound)
}

func TestAdvisoriesAreListedButNotReplayable(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	body := `{"type":"io.nats.jetstream.advisory.v1.max_deliver","stream":"ORDER","consumer":"hung","stream_seq":7,"deliveries":20}`
	_, err := js.Publish(ctx, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDER.hung", []byte(body))
	require.NoError(t, err)

	l, err := natsx.ListDeadLetters(ctx, js, natsx.DeadLetterFilter{Consumers: []string{"hung"}})
	require.NoError(t, err)
	require.Len(t, l.DeadLetters, 1)
	assert.Equal(t, natsx.KindAdvisory, l.DeadLetters[0].Kind)
	assert.Equal(t, "ORDER", l.DeadLetters[0].Stream)

	dl, err := natsx.GetDeadLetter(ctx, js, l.DeadLetters[0].Seq)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), dl.StreamSeq)
	assert.Equal(t, uint64(20), dl.Deliveries)
	assert.Equal(t, "max_deliveries", dl.Reason)
	err = natsx.Replay(ctx, func(context.Context, jetstream.Msg) error { return nil }, dl)
	assert.ErrorIs(t, err, natsx.ErrNotReplayable)
}

// A service user lists and shows dead letters on the locked-down server: the ordered consumers
// are within its permissions (no by-sequence get, no filtered consumer, no delete of messages).
func TestServiceListsAndShowsDeadLettersUnderLockdown(t *testing.T) {
	l, admin := lockedSetup(t)
	ctx := context.Background()
	m := nats.NewMsg(natsx.SubjectDeadLetterPrefix + events.SubjectOrderCreated)
	m.Data = []byte(`{"x":1}`)
	m.Header.Set(natsx.HeaderDLConsumer, "stock-order-created")
	m.Header.Set(natsx.HeaderDLSubject, events.SubjectOrderCreated)
	for range 3 {
		_, err := admin.js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	c := dial(t, l, "stock")
	list, err := natsx.ListDeadLetters(ctx, c.js, natsx.DeadLetterFilter{Consumers: []string{"stock-order-created"}})
	require.NoError(t, err)
	assert.Len(t, list.DeadLetters, 3)
	dl, err := natsx.GetDeadLetter(ctx, c.js, 2)
	require.NoError(t, err)
	assert.Equal(t, `{"x":1}`, string(dl.Data))
	time.Sleep(200 * time.Millisecond) // let any refused request's async error arrive
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Empty(t, c.errs)
}
