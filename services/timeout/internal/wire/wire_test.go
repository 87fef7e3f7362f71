package wire_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/timeout/internal/config"
	"github.com/stockflow/stockflow/services/timeout/internal/consumers"
	"github.com/stockflow/stockflow/services/timeout/internal/wire"
)

// system runs the timeout service's parts as service.Main would: a migrated database, a real
// NATS server with every stream (SCHEDULES allows message schedules), the outbox relay, the
// consumers, the sweeper loop and the HTTP handler.
type system struct {
	t    *testing.T
	pool *pgxpool.Pool
	js   jetstream.JetStream
	url  string
	kit  *authtest.Kit
}

// start runs the system with a sweeper every sweepInterval and the settings env.
func start(t *testing.T, sweepInterval time.Duration, env ...string) *system {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool, _ := pgtest.New(t, wire.Schemas()...)
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))

	log := slog.New(slog.DiscardHandler)
	cfg, err := config.Load(append([]string{"TIMEOUT_SWEEP_INTERVAL=" + sweepInterval.String()}, env...))
	require.NoError(t, err)
	kit := authtest.New(t)
	parts := wire.Build(pool, js, log, cfg, pool.Ping, kit.Verifier)

	done := make(chan error, 1+len(parts.Loops))
	go func() {
		done <- outbox.NewRelay(pool, js, outbox.RelayOptions{PollInterval: 10 * time.Millisecond, Logger: log}).Run(ctx)
	}()
	for _, loop := range parts.Loops {
		go func() { done <- loop(ctx) }()
	}
	var stops []func()
	for _, c := range parts.Consumers {
		stop, err := natsx.Consume(ctx, js, c.Spec, c.Handle, log)
		require.NoError(t, err)
		stops = append(stops, stop)
	}
	srv := httptest.NewServer(parts.Handler)
	t.Cleanup(func() {
		srv.Close()
		for _, s := range stops {
			s()
		}
		cancel()
		for range 1 + len(parts.Loops) {
			assert.NoError(t, <-done)
		}
	})
	return &system{t: t, pool: pool, js: js, url: srv.URL, kit: kit}
}

func (s *system) publish(ev events.Event) events.Message {
	s.t.Helper()
	m, err := events.Encode(ev, time.Now())
	require.NoError(s.t, err)
	s.republish(m)
	return m
}

func (s *system) republish(m events.Message) {
	s.t.Helper()
	_, err := s.js.Publish(context.Background(), m.Subject, m.Data, jetstream.WithMsgID(m.ID))
	require.NoError(s.t, err)
}

// settle waits until every consumer has handled every message published so far: the
// positive signal that a duplicate or late message was processed, before asserting that it
// changed nothing.
func (s *system) settle() {
	s.t.Helper()
	natstest.WaitSettled(s.t, s.js, natsx.StreamStock, consumers.StockLocked, consumers.StockResolved)
	natstest.WaitSettled(s.t, s.js, natsx.StreamSchedules, consumers.Fire)
}

func locked(orderID string, deadline time.Time) events.StockLocked {
	return events.StockLocked{OrderID: orderID, Lines: []events.Line{{SKU: "CUP-1", Qty: 1}}, PaymentDeadline: deadline}
}

// streamMsgs returns the messages stored in stream on subject, oldest first.
func (s *system) streamMsgs(stream, subject string) []*jetstream.RawStreamMsg {
	s.t.Helper()
	ctx := context.Background()
	st, err := s.js.Stream(ctx, stream)
	require.NoError(s.t, err)
	info, err := st.Info(ctx)
	require.NoError(s.t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil && strings.Contains(err.Error(), "not found") {
			continue // purged or replaced
		}
		require.NoError(s.t, err)
		if subject == "" || m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}

func (s *system) expired() []*jetstream.RawStreamMsg {
	return s.streamMsgs(natsx.StreamTimeout, events.SubjectTimeoutExpired)
}

func (s *system) state(orderID string) string {
	s.t.Helper()
	var st string
	err := s.pool.QueryRow(context.Background(), `SELECT state FROM deadlines WHERE order_id = $1`, orderID).Scan(&st)
	if err != nil {
		return ""
	}
	return st
}

func (s *system) waitState(orderID, want string) {
	s.t.Helper()
	require.Eventually(s.t, func() bool { return s.state(orderID) == want }, 10*time.Second, 10*time.Millisecond,
		"deadline of %s never became %s (is %q)", orderID, want, s.state(orderID))
}

// noSweeper is a sweep interval long enough that only scheduled messages expire deadlines.
const noSweeper = 10 * time.Minute

func TestLockedOrderExpiresThroughItsScheduledMessage(t *testing.T) {
	s := start(t, noSweeper)
	deadline := time.Now().Add(1500 * time.Millisecond)
	s.publish(locked("ord-1", deadline))
	s.waitState("ord-1", "scheduled")

	require.Eventually(t, func() bool { return len(s.expired()) == 1 }, 10*time.Second, 20*time.Millisecond)
	got := s.expired()[0]
	assert.False(t, time.Now().Before(deadline), "never before the deadline")
	assert.Equal(t, "timeout-expired:ord-1", got.Header.Get(jetstream.MsgIDHeader))
	_, ev, err := events.Decode[events.TimeoutExpired](got.Data)
	require.NoError(t, err)
	assert.Equal(t, "ord-1", ev.OrderID)
	assert.True(t, ev.Deadline.Equal(deadline.Truncate(time.Microsecond)), "deadline %s", ev.Deadline)
	assert.Equal(t, "expired", s.state("ord-1"))
	assert.Len(t, s.streamMsgs(natsx.StreamSchedules, natsx.FireSubject("ord-1")), 1, "it expired through the fired message")

	status, body := s.get(s.url + "/v1/deadlines/ord-1")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"state":"expired"`)
}

func TestResolvedBeforeTheDeadlineNeverExpires(t *testing.T) {
	s := start(t, 200*time.Millisecond) // the sweeper runs too: it must not expire them either
	s.publish(locked("ord-sold", time.Now().Add(time.Second)))
	s.publish(locked("ord-released", time.Now().Add(time.Second)))
	s.waitState("ord-sold", "scheduled")
	s.waitState("ord-released", "scheduled")
	require.Eventually(t, func() bool {
		return len(s.streamMsgs(natsx.StreamSchedules, natsx.ScheduleSubject("ord-sold"))) == 1
	}, 5*time.Second, 10*time.Millisecond, "the schedule reached JetStream")

	s.publish(events.StockSold{OrderID: "ord-sold"})
	s.publish(events.StockReleased{OrderID: "ord-released", Reason: events.ReleaseCancel})
	s.waitState("ord-sold", "cancelled")
	s.waitState("ord-released", "cancelled")
	require.Eventually(t, func() bool {
		return len(s.streamMsgs(natsx.StreamSchedules, natsx.ScheduleSubject("ord-sold"))) == 0
	}, 5*time.Second, 10*time.Millisecond, "the pending schedule was cancelled")

	time.Sleep(2 * time.Second) // past both deadlines
	assert.Empty(t, s.expired())
	assert.Equal(t, "cancelled", s.state("ord-sold"))
}

func TestSweeperAloneExpiresWhenTheScheduleIsLost(t *testing.T) {
	s := start(t, 200*time.Millisecond)
	s.publish(locked("ord-lost", time.Now().Add(time.Second)))
	require.Eventually(t, func() bool {
		return len(s.streamMsgs(natsx.StreamSchedules, natsx.ScheduleSubject("ord-lost"))) == 1
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, natsx.CancelSchedule(context.Background(), s.js, "ord-lost")) // the schedule is lost

	require.Eventually(t, func() bool { return len(s.expired()) == 1 }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, "expired", s.state("ord-lost"))
	assert.Empty(t, s.streamMsgs(natsx.StreamSchedules, natsx.FireSubject("ord-lost")), "nothing fired: the sweeper did it")
}

// TestClockAheadExpiresEarlyAndKeepsRunning: with CLOCK_OFFSET (a fault-injection run) the
// service's clock runs an hour ahead, so its sweeper expires a deadline half an hour away at
// once — what stock checks against its own clock (F19) — and nothing fails.
func TestClockAheadExpiresEarlyAndKeepsRunning(t *testing.T) {
	s := start(t, 200*time.Millisecond, "CLOCK_OFFSET=1h")
	s.publish(locked("ord-ahead", time.Now().Add(30*time.Minute)))
	require.Eventually(t, func() bool { return len(s.expired()) == 1 }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, "expired", s.state("ord-ahead"))
	s.settle()
}

// TestFireBeforeOurDeadlineComesBackWhenDue: with this service's clock 3 s behind the NATS
// server's (a clock stepped back), the scheduled message fires 3 s early by our clock. It is
// not expired then, and comes back once, when it is due by our clock — not on the usual
// backoff, whose budget a clock far enough behind would exhaust into DEADLETTER.
func TestFireBeforeOurDeadlineComesBackWhenDue(t *testing.T) {
	s := start(t, noSweeper, "CLOCK_OFFSET=-3s")
	s.publish(locked("ord-behind", time.Now().Add(time.Second)))
	require.Eventually(t, func() bool { return len(s.expired()) == 1 }, 15*time.Second, 20*time.Millisecond)
	assert.Equal(t, "expired", s.state("ord-behind"))
	s.settle()
	cons, err := s.js.Consumer(context.Background(), natsx.StreamSchedules, consumers.Fire)
	require.NoError(t, err)
	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(2), info.Delivered.Consumer, "delivered early once, then once when due")
}

func TestDuplicatesAndLateFiresChangeNothing(t *testing.T) {
	s := start(t, 200*time.Millisecond)
	m := s.publish(locked("ord-dup", time.Now().Add(time.Second)))
	s.waitState("ord-dup", "scheduled")                     // handlers run side by side: the second must come after the first
	s.publish(locked("ord-dup", time.Now().Add(time.Hour))) // another stock.locked for the order
	require.Eventually(t, func() bool { return len(s.expired()) == 1 }, 10*time.Second, 20*time.Millisecond)

	// After expiry: the same stock.locked again (past the dedupe window, say), a late sale,
	// and a stray fire. None expires or schedules anything again.
	_, err := s.js.Publish(context.Background(), m.Subject, m.Data) // no Nats-Msg-Id: JetStream stores it again
	require.NoError(t, err)
	s.publish(events.StockSold{OrderID: "ord-dup"})
	fired := s.streamMsgs(natsx.StreamSchedules, natsx.FireSubject("ord-dup"))
	if len(fired) == 1 {
		_, err = s.js.Publish(context.Background(), fired[0].Subject, fired[0].Data)
		require.NoError(t, err)
	}
	s.settle() // every copy was handled: what they did is committed
	assert.Len(t, s.expired(), 1)
	assert.Equal(t, "expired", s.state("ord-dup"), "the first resolution stands")
	var outboxRows int
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&outboxRows))
	assert.Equal(t, 2, outboxRows, "one schedule, one expiry")
}

func TestResolvedBeforeItsLockArrivesSchedulesNothing(t *testing.T) {
	s := start(t, 200*time.Millisecond)
	s.publish(events.StockReleased{OrderID: "ord-early", Reason: events.ReleaseCancel})
	s.waitState("ord-early", "cancelled")
	s.publish(locked("ord-early", time.Now().Add(500*time.Millisecond)))
	s.settle() // the late stock.locked was handled
	assert.Equal(t, "cancelled", s.state("ord-early"))
	var outboxRows int
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&outboxRows))
	assert.Zero(t, outboxRows, "no schedule was written")
	assert.Empty(t, s.streamMsgs(natsx.StreamSchedules, ""))
	assert.Empty(t, s.expired())
}

func TestAdminSweepOnDemand(t *testing.T) {
	s := start(t, noSweeper)
	sweep := func(bearer string) int {
		req, err := http.NewRequest("POST", s.url+"/v1/admin/sweep", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", bearer)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, sweep(""))
	assert.Equal(t, http.StatusForbidden, sweep(s.kit.Bearer("vera", auth.Viewer)))
	assert.Equal(t, http.StatusOK, sweep(s.kit.Bearer("olga", auth.Operator)))
	status, body := s.get(s.url + "/v1/deadlines/nope")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Contains(t, body, "deadline_not_found")
	status, _ = s.get(s.url + "/readyz")
	assert.Equal(t, http.StatusOK, status)
}

// get reads url as a viewer.
func (s *system) get(url string) (int, string) {
	t := s.t
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", s.kit.Bearer("vera", auth.Viewer))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, err = io.Copy(&b, resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b.String()
}

// The parts plug into service.Spec as they are.
var _ func(context.Context, service.Deps) (service.Parts, error) = wire.Parts(config.Config{})
