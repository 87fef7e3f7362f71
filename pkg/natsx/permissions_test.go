package natsx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// refusalWait bounds a refused request: the server answers a denied publish with an
// asynchronous permissions violation only, so the request itself runs into its deadline.
const refusalWait = 500 * time.Millisecond

// conn is a connection whose asynchronous errors (permissions violations) the test reads.
type conn struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []error
}

// dial connects to l as user, with the user's inbox prefix as natsx.Connect sets it.
func dial(t *testing.T, l natstest.Locked, user string) *conn {
	t.Helper()
	c := &conn{}
	nc, err := nats.Connect(l.As(user), nats.CustomInboxPrefix(natsx.InboxPrefix(user)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
		}))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	require.NoError(t, err)
	return c
}

// violated reports whether the server refused op ("Publish" or "Subscription") on subject.
func (c *conn) violated(op, subject string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, err := range c.errs {
		if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), op+` to "`+subject+`"`) {
			return true
		}
	}
	return false
}

// assertRefused runs call, which must fail, and expects the server's permissions violation for
// publishing to subject.
func assertRefused(t *testing.T, c *conn, subject string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), refusalWait)
	defer cancel()
	assert.Error(t, call(ctx), "publish to %s went through", subject)
	assert.Eventually(t, func() bool { return c.violated("Publish", subject) }, 2*time.Second, 10*time.Millisecond,
		"no permissions violation for %s", subject)
}

// lockedSetup starts a locked-down server and ensures the streams as the admin.
func lockedSetup(t *testing.T) (natstest.Locked, *conn) {
	t.Helper()
	l := natstest.StartLocked(t)
	admin := dial(t, l, natsx.AdminUser)
	require.NoError(t, natsx.ApplyStreams(context.Background(), admin.js, 1))
	return l, admin
}

func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

func TestLockedServerRefusesUnauthenticatedAndWrongPassword(t *testing.T) {
	l := natstest.StartLocked(t)
	_, err := nats.Connect(l.URL)
	assert.ErrorIs(t, err, nats.ErrAuthorization, "a connection without credentials")
	wrong, err := natsx.WithCredentials(l.URL, "stock", l.Password("order"))
	require.NoError(t, err)
	_, err = nats.Connect(wrong)
	assert.ErrorIs(t, err, nats.ErrAuthorization, "stock with order's password")
	_, _, err = natsx.Connect(context.Background(), wrong, "test")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), l.Password("order"), "the error does not show the password")
}

// F2: with stock's credentials, payment.succeeded is refused and never stored; a service can
// forge no other service's events either.
func TestServiceCannotPublishAnotherServicesEvents(t *testing.T) {
	l, admin := lockedSetup(t)
	stock := dial(t, l, "stock")
	assertRefused(t, stock, events.SubjectPaymentSucceeded, func(ctx context.Context) error {
		_, err := stock.js.Publish(ctx, events.SubjectPaymentSucceeded, []byte(`{"payment_id":"x","order_id":"o-1"}`))
		return err
	})
	assert.Zero(t, streamMsgs(t, admin.js, natsx.StreamPayment), "the forged payment.succeeded was stored")

	foreign := map[string][]string{
		"order":           {events.SubjectStockSold, events.SubjectPaymentSucceeded, events.SubjectTimeoutExpired},
		"stock":           {events.SubjectOrderCreated, events.SubjectTimeoutExpired, natsx.ScheduleSubject("o-1")},
		"payment-adapter": {events.SubjectOrderCreated, events.SubjectStockSold, events.SubjectTimeoutExpired},
		"timeout":         {events.SubjectPaymentSucceeded, events.SubjectOrderCreated, events.SubjectStockReleased, natsx.FireSubject("o-1")},
	}
	for user, subjects := range foreign {
		t.Run(user, func(t *testing.T) {
			t.Parallel()
			c := dial(t, l, user)
			for _, subject := range subjects {
				assertRefused(t, c, subject, func(ctx context.Context) error {
					_, err := c.js.Publish(ctx, subject, []byte(`{}`))
					return err
				})
			}
		})
	}
}

// F2: no service user may purge or delete a stream, create or change one, delete messages or
// delete the consumers that feed the services; nor pull from another service's consumer or
// listen to its replies.
func TestServiceCannotManageStreamsOrTouchOthersConsumers(t *testing.T) {
	l, admin := lockedSetup(t)
	ctx := context.Background()
	_, err := admin.js.Publish(ctx, events.SubjectPaymentSucceeded, []byte(`{}`))
	require.NoError(t, err)
	_, err = admin.js.CreateOrUpdateConsumer(ctx, natsx.StreamStock, jetstream.ConsumerConfig{Durable: "order-stock-outcomes", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)

	t.Run("services", func(t *testing.T) { // returns once its parallel subtests are done
		for _, user := range natsx.ServiceUsers() {
			t.Run(user, func(t *testing.T) {
				t.Parallel()
				refusedManagement(t, l, user)
			})
		}
	})
	t.Run("timeout cancels schedules but purges nothing else", func(t *testing.T) {
		c := dial(t, l, "timeout")
		require.NoError(t, natsx.CancelSchedule(ctx, c.js, "o-1"))
		assert.False(t, c.violated("Publish", "$JS.API.STREAM.PURGE.SCHEDULES"))
	})

	assert.Equal(t, uint64(1), streamMsgs(t, admin.js, natsx.StreamPayment), "PAYMENT lost its message")
	names := admin.js.StreamNames(ctx)
	var got []string
	for n := range names.Name() {
		got = append(got, n)
	}
	require.NoError(t, names.Err())
	assert.ElementsMatch(t, []string{"ORDER", "STOCK", "PAYMENT", "TIMEOUT", "SCHEDULES", "DEADLETTER"}, got)
	_, err = admin.js.Consumer(ctx, natsx.StreamStock, "order-stock-outcomes")
	assert.NoError(t, err, "the order service's consumer was deleted")
	drifts, err := natsx.CheckStreams(ctx, admin.js, 1)
	require.NoError(t, err, "a stream was changed")
	assert.Empty(t, drifts, "a stream was changed")
}

func refusedManagement(t *testing.T, l natstest.Locked, user string) {
	ctx := context.Background()
	c := dial(t, l, user)
	payment, err := c.js.Stream(ctx, natsx.StreamPayment) // stream info is allowed
	require.NoError(t, err)
	assertRefused(t, c, "$JS.API.STREAM.PURGE.PAYMENT", func(ctx context.Context) error { return payment.Purge(ctx) })
	assertRefused(t, c, "$JS.API.STREAM.DELETE.PAYMENT", func(ctx context.Context) error {
		return c.js.DeleteStream(ctx, natsx.StreamPayment)
	})
	assertRefused(t, c, "$JS.API.STREAM.MSG.DELETE.PAYMENT", func(ctx context.Context) error { return payment.DeleteMsg(ctx, 1) })
	assertRefused(t, c, "$JS.API.STREAM.CREATE.FORGED", func(ctx context.Context) error {
		_, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "FORGED", Subjects: []string{"forged.>"}})
		return err
	})
	assertRefused(t, c, "$JS.API.STREAM.UPDATE.ORDER", func(ctx context.Context) error {
		_, err := c.js.UpdateStream(ctx, jetstream.StreamConfig{Name: natsx.StreamOrder, Subjects: []string{"order.created"}})
		return err
	})
	assertRefused(t, c, "$JS.API.CONSUMER.DELETE.STOCK.order-stock-outcomes", func(ctx context.Context) error {
		return c.js.DeleteConsumer(ctx, natsx.StreamStock, "order-stock-outcomes")
	})
	if user != "order" {
		// Pulling (and so acking away) the order service's deliveries.
		assertRefused(t, c, "$JS.API.CONSUMER.MSG.NEXT.STOCK.order-stock-outcomes", func(ctx context.Context) error {
			_, err := c.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT.STOCK.order-stock-outcomes", []byte(`{"batch":1}`))
			return err
		})
		// Listening to the order service's replies and deliveries.
		_, err := c.nc.SubscribeSync(natsx.InboxPrefix("order") + ".>")
		require.NoError(t, err)
		require.NoError(t, c.nc.Flush())
		assert.Eventually(t, func() bool { return c.violated("Subscription", natsx.InboxPrefix("order")+".>") }, 2*time.Second, 10*time.Millisecond)
	}
}

// eventOn is a subject of each stream for the durable consumers' test messages.
var eventOn = map[string]string{
	natsx.StreamOrder:     events.SubjectOrderCreated,
	natsx.StreamStock:     events.SubjectStockLocked,
	natsx.StreamPayment:   events.SubjectPaymentSucceeded,
	natsx.StreamTimeout:   events.SubjectTimeoutExpired,
	natsx.StreamSchedules: natsx.FireSubject("o-1"),
}

// Each service, connected as natsx.Connect does, checks the streams, publishes its own events,
// and runs each of its durable consumers through Consume: acks and dead letters go through,
// and no permissions violation happens on the way.
func TestServicesPublishAndConsumeWhatTheyOwn(t *testing.T) {
	l, admin := lockedSetup(t)
	ctx := context.Background()
	owned := map[string][]string{
		"order":           {events.SubjectOrderCreated, events.SubjectOrderCancelRequested},
		"stock":           {events.SubjectStockLocked, events.SubjectStockSold},
		"payment-adapter": {events.SubjectPaymentSucceeded, events.SubjectPaymentRefunded},
		"timeout":         {events.SubjectTimeoutExpired},
	}
	for _, user := range natsx.ServiceUsers() {
		t.Run(user, func(t *testing.T) {
			var mu sync.Mutex
			var asyncErrs []error
			nc, js, err := natsx.Connect(ctx, l.As(user), user)
			require.NoError(t, err)
			defer nc.Close()
			nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				mu.Lock()
				asyncErrs = append(asyncErrs, err)
				mu.Unlock()
			})
			_, err = natsx.PrepareStreams(ctx, nc, js, 1)
			require.NoError(t, err, "a service only checks the streams")

			for _, subject := range owned[user] {
				_, err := js.Publish(ctx, subject, []byte(`{}`), jetstream.WithMsgID(user+":"+subject))
				require.NoError(t, err, "%s publishes %s", user, subject)
			}
			if user == "timeout" {
				publishSchedule(t, js, "o-1", time.Now().Add(time.Hour), `{}`)
				require.NoError(t, natsx.CancelSchedule(ctx, js, "o-1"))
			}

			for _, d := range natsx.DurablesOf(user) {
				stream, durable := d[0], d[1]
				ok, err := admin.js.Publish(ctx, eventOn[stream], []byte("ok"))
				require.NoError(t, err)
				poison, err := admin.js.Publish(ctx, eventOn[stream], []byte("poison"))
				require.NoError(t, err)
				// Pinned, so that stop's unpin is asked for too (a refusal lands in asyncErrs).
				stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: stream, Durable: durable, FilterSubjects: []string{eventOn[stream]}, AckWait: 5 * time.Second, PriorityGroup: "any"},
					func(_ context.Context, msg jetstream.Msg) error {
						if string(msg.Data()) == "poison" {
							return natsx.Permanent(errors.New("poison"))
						}
						return nil
					}, testLogger(t))
				require.NoError(t, err, "%s consumes %s/%s", user, stream, durable)
				require.Eventually(t, func() bool {
					c, err := js.Consumer(ctx, stream, durable) // consumer info, as reconcile reads it
					if err != nil {
						return false
					}
					info, err := c.Info(ctx)
					return err == nil && info.AckFloor.Stream >= poison.Sequence && info.NumAckPending == 0
				}, 10*time.Second, 20*time.Millisecond, "%s/%s never acked %d and %d", stream, durable, ok.Sequence, poison.Sequence)
				stop()
				dl, err := lastMsg(ctx, admin.js, natsx.StreamDeadLetter, natsx.SubjectDeadLetterPrefix+eventOn[stream])
				require.NoError(t, err, "%s/%s dead-lettered nothing", stream, durable)
				assert.Equal(t, durable, dl.Header.Get(natsx.HeaderDLConsumer))
				assert.Equal(t, fmt.Sprint(poison.Sequence), dl.Header.Get(natsx.HeaderDLStreamSeq))
			}
			mu.Lock()
			defer mu.Unlock()
			assert.Empty(t, asyncErrs, "%s ran into refusals", user)
		})
	}
}

// An ordered consumer on DEADLETTER, read in several fetches as the outbox reconcile job reads
// it, works for a service user: each fetch after the first deletes the previous ephemeral
// consumer, which the table allows on DEADLETTER only.
func TestServiceReadsDeadLettersWithAnOrderedConsumer(t *testing.T) {
	l, admin := lockedSetup(t)
	ctx := context.Background()
	for i := range 5 {
		_, err := admin.js.Publish(ctx, natsx.SubjectDeadLetterPrefix+events.SubjectOrderCreated, []byte(fmt.Sprint(i)))
		require.NoError(t, err)
	}
	c := dial(t, l, "payment-adapter")
	oc, err := c.js.OrderedConsumer(ctx, natsx.StreamDeadLetter, jetstream.OrderedConsumerConfig{HeadersOnly: true, InactiveThreshold: 30 * time.Second})
	require.NoError(t, err)
	read := 0
	for range 3 {
		batch, err := oc.Fetch(2, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		for range batch.Messages() {
			read++
		}
	}
	assert.Equal(t, 5, read)
	time.Sleep(200 * time.Millisecond) // the previous consumers' deletes run in the background
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Empty(t, c.errs)
}

func TestPrepareStreams(t *testing.T) {
	ctx := context.Background()
	t.Run("open server: the service creates them", func(t *testing.T) {
		nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
		require.NoError(t, err)
		defer nc.Close()
		drifts, err := natsx.PrepareStreams(ctx, nc, js, 1)
		require.NoError(t, err)
		assert.Empty(t, drifts)
		drifts, err = natsx.CheckStreams(ctx, js, 1)
		require.NoError(t, err)
		assert.Empty(t, drifts)
	})
	t.Run("locked server: a service only checks", func(t *testing.T) {
		l := natstest.StartLocked(t)
		nc, js, err := natsx.Connect(ctx, l.As("stock"), t.Name())
		require.NoError(t, err)
		defer nc.Close()
		_, err = natsx.PrepareStreams(ctx, nc, js, 1)
		require.ErrorIs(t, err, natsx.ErrStreamsNotReady)
		assert.Contains(t, err.Error(), "PAYMENT is missing")

		admin := dial(t, l, natsx.AdminUser)
		require.NoError(t, natsx.ApplyStreams(ctx, admin.js, 1))
		_, err = natsx.PrepareStreams(ctx, nc, js, 1)
		require.NoError(t, err)

		// A lesser difference is reported, and the service starts.
		changed := natsx.StreamConfigs(1)[0]
		changed.MaxAge = time.Hour
		_, err = admin.js.UpdateStream(ctx, changed)
		require.NoError(t, err)
		drifts, err := natsx.PrepareStreams(ctx, nc, js, 1)
		require.NoError(t, err)
		assert.Equal(t, []string{changed.Name + " differs in max age"}, drifts)

		// A stream from before the partitions: order.created.<key> is stored unpartitioned,
		// which stock also consumes; a start is not stopped.
		changed.SubjectTransform = nil
		_, err = admin.js.UpdateStream(ctx, changed)
		require.NoError(t, err)
		drifts, err = natsx.PrepareStreams(ctx, nc, js, 1)
		require.NoError(t, err)
		assert.Equal(t, []string{changed.Name + " differs in subject transform, max age"}, drifts)
		// Another partition count fills partitions this build may not consume: stopped.
		changed.SubjectTransform = &jetstream.SubjectTransformConfig{Source: "order.created.*",
			Destination: "order.created.{{partition(16,1)}}.{{wildcard(1)}}"}
		_, err = admin.js.UpdateStream(ctx, changed)
		require.NoError(t, err)
		_, err = natsx.PrepareStreams(ctx, nc, js, 1)
		require.ErrorIs(t, err, natsx.ErrStreamsNotReady)
		assert.Contains(t, err.Error(), changed.Name+" differs in subject transform")
		changed.SubjectTransform = natsx.StreamConfigs(1)[0].SubjectTransform

		// One the services cannot work without stops it.
		changed.Subjects = append(changed.Subjects, "extra.>")
		_, err = admin.js.UpdateStream(ctx, changed)
		require.NoError(t, err)
		_, err = natsx.PrepareStreams(ctx, nc, js, 1)
		require.ErrorIs(t, err, natsx.ErrStreamsNotReady)
		assert.Contains(t, err.Error(), changed.Name+" differs in subjects")
	})
}

// A starting process never changes an existing stream: what an operator configured (three
// replicas on a cluster, a longer age) stays until ApplyStreams, the explicit command, runs.
func TestStartingNeverChangesAStream(t *testing.T) {
	ctx := context.Background()
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))
	operators := natsx.StreamConfigs(1)[0]
	operators.MaxAge = 30 * 24 * time.Hour
	_, err = js.UpdateStream(ctx, operators)
	require.NoError(t, err)
	require.NoError(t, js.DeleteStream(ctx, natsx.StreamTimeout))

	drifts, err := natsx.PrepareStreams(ctx, nc, js, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{operators.Name + " differs in max age"}, drifts)
	s, err := js.Stream(ctx, operators.Name)
	require.NoError(t, err)
	assert.Equal(t, operators.MaxAge, s.CachedInfo().Config.MaxAge, "a start reset the operator's setting")
	_, err = js.Stream(ctx, natsx.StreamTimeout)
	assert.NoError(t, err, "a missing stream is created")

	// On a single server three replicas cannot be had: the stream created with one is
	// reported, not failed, so a misconfigured replica count is visible at every start.
	drifts, err = natsx.CheckStreams(ctx, js, 3)
	require.NoError(t, err)
	assert.Contains(t, drifts, natsx.StreamTimeout+" differs in replicas (1, configured 3)")

	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))
	drifts, err = natsx.CheckStreams(ctx, js, 1)
	require.NoError(t, err)
	assert.Empty(t, drifts, "apply brings every stream to the configuration")
}

func TestAuthorizationConfigQuotesAndNeedsEveryPassword(t *testing.T) {
	assert.Equal(t, `"$JS.API.STREAM.INFO.ORDER"`, natsx.ConfString("$JS.API.STREAM.INFO.ORDER"))
	assert.Equal(t, `"a\"b\\c\x0a"`, natsx.ConfString("a\"b\\c\n"))
	pw, err := natsx.NewPasswords()
	require.NoError(t, err)
	assert.ElementsMatch(t, natsx.Users(), keys(pw))
	delete(pw, "timeout")
	_, err = natsx.AuthorizationConfig(pw)
	assert.ErrorContains(t, err, "timeout")
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
