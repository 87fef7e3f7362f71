package deadletter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/deadletter"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

const durable = "stock-order-created"

var errUnknownSKU = errors.New("unknown sku")

// shop is a consumer like stock's lock-for-order: it locks an order's lines in one transaction
// with the inbox claim, and an order for a SKU it does not know is poison.
type shop struct {
	pool  *pgxpool.Pool
	known atomic.Bool // whether the SKU exists yet: the cause an operator fixes
}

func (s *shop) lock(ctx context.Context, in inbox.Message, ev events.OrderCreated) error {
	if !s.known.Load() {
		return fmt.Errorf("lock order %s: %w", ev.OrderID, errUnknownSKU)
	}
	return postgres.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		fresh, err := inbox.Claim(ctx, tx, in.Consumer, in.ID)
		if err != nil || !fresh {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE locked SET qty = qty + $1`, ev.Items[0].Qty)
		return err
	})
}

func (s *shop) lockedQty(t *testing.T) int64 {
	t.Helper()
	var n int64
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT qty FROM locked`).Scan(&n))
	return n
}

type env struct {
	js   jetstream.JetStream
	shop *shop
	kit  *authtest.Kit
	srv  *httptest.Server
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	pool, _ := pgtest.New(t, inbox.Schema, deadletter.Schema)
	_, err := pool.Exec(ctx, `CREATE TABLE locked (qty bigint NOT NULL); INSERT INTO locked VALUES (0)`)
	require.NoError(t, err)
	nc, js, err := natsx.Connect(ctx, natstest.Start(t), t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.NoError(t, natsx.ApplyStreams(ctx, js, 1))

	s := &shop{pool: pool}
	h := natsx.On(durable, natsx.Errors{Permanent: []error{errUnknownSKU}}, s.lock)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: durable,
		FilterSubjects: []string{events.SubjectOrderCreated + ".>"}}, h, log)
	require.NoError(t, err)
	t.Cleanup(stop)

	kit := authtest.New(t)
	admin := deadletter.New(pool, js, map[string]natsx.Handler{durable: h}, log)
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	srv := httptest.NewServer(deadletter.Mount(next, admin, log, kit.Verifier))
	t.Cleanup(srv.Close)
	return &env{js: js, shop: s, kit: kit, srv: srv}
}

// order publishes an order.created for qty as the outbox relay would.
func (e *env) order(t *testing.T, qty int64) {
	t.Helper()
	m, err := events.Encode(events.OrderCreated{OrderID: "o-1", BuyerID: "b-1", Currency: "EUR", Total: 100 * qty,
		PaymentDeadline: time.Now().Add(time.Hour), Items: []events.OrderItem{{SKU: "sku-1", Qty: qty, UnitPrice: 100}}}, time.Now())
	require.NoError(t, err)
	_, err = e.js.Publish(context.Background(), m.Subject, m.Data, jetstream.WithMsgID(m.ID))
	require.NoError(t, err)
}

// call makes a request with a token of role (none for "") and decodes a JSON answer into out.
func (e *env) call(t *testing.T, method, path string, role auth.Role, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, nil)
	require.NoError(t, err)
	if role != "" {
		req.Header.Set("Authorization", "Bearer "+e.kit.Token("alice", role))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && len(body) > 0 {
		require.NoError(t, json.Unmarshal(body, out), "%s", body)
	}
	return resp.StatusCode
}

type deadLetter struct {
	Seq        uint64          `json:"seq"`
	Kind       string          `json:"kind"`
	Subject    string          `json:"subject"`
	Consumer   string          `json:"consumer"`
	Reason     string          `json:"reason"`
	Error      string          `json:"error"`
	Deliveries uint64          `json:"deliveries"`
	Replayed   bool            `json:"replayed"`
	Body       json.RawMessage `json:"body"`
	Headers    nats.Header     `json:"headers"`
	Replays    []struct {
		By      string `json:"by"`
		Outcome string `json:"outcome"`
		Error   string `json:"error"`
	} `json:"replays"`
}

type list struct {
	DeadLetters []deadLetter `json:"dead_letters"`
	Consumers   []string     `json:"consumers"`
}

type errBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (e *env) pending(t *testing.T) []deadLetter {
	t.Helper()
	var l list
	require.Equal(t, http.StatusOK, e.call(t, http.MethodGet, "/v1/admin/deadletters", auth.Operator, &l))
	return l.DeadLetters
}

// The whole story: an order for a SKU stock does not know yet is dead-lettered; the list shows
// it; a replay before the fix fails and is kept; after the SKU exists a replay applies the
// order once; the list no longer shows it as pending; replaying it again changes nothing.
func TestReplayAfterTheFixAppliesOnceAndAgainChangesNothing(t *testing.T) {
	e := setup(t)
	e.order(t, 3)
	require.Eventually(t, func() bool { return len(e.pending(t)) == 1 }, 10*time.Second, 50*time.Millisecond, "not dead-lettered")

	dl := e.pending(t)[0]
	assert.Regexp(t, `^order\.created\.\d+\.sku-1$`, dl.Subject, "the subject the stream stored: order.created.<partition>.<key>")
	assert.Equal(t, durable, dl.Consumer)
	assert.Equal(t, "poison", dl.Reason)
	assert.Contains(t, dl.Error, "unknown sku")
	assert.False(t, dl.Replayed)
	path := fmt.Sprintf("/v1/admin/deadletters/%d", dl.Seq)

	var shown deadLetter
	require.Equal(t, http.StatusOK, e.call(t, http.MethodGet, path, auth.Admin, &shown))
	assert.Contains(t, string(shown.Body), `"sku":"sku-1"`, "show has the original body")
	assert.Equal(t, durable, shown.Headers.Get(natsx.HeaderDLConsumer))

	var failed errBody
	require.Equal(t, http.StatusUnprocessableEntity, e.call(t, http.MethodPost, path+"/replay", auth.Admin, &failed))
	assert.Equal(t, "replay_failed", failed.Error.Code)
	assert.Contains(t, failed.Error.Message, "unknown sku")
	still := e.pending(t)
	require.Len(t, still, 1, "a failed replay leaves it pending")
	require.Len(t, still[0].Replays, 1)
	assert.Equal(t, deadletter.OutcomeFailed, still[0].Replays[0].Outcome)
	assert.Equal(t, int64(0), e.shop.lockedQty(t))

	e.shop.known.Store(true) // the operator creates the SKU
	var res struct {
		DeadLetter      deadLetter `json:"dead_letter"`
		AlreadyReplayed bool       `json:"already_replayed"`
	}
	require.Equal(t, http.StatusOK, e.call(t, http.MethodPost, path+"/replay", auth.Admin, &res))
	assert.False(t, res.AlreadyReplayed)
	assert.True(t, res.DeadLetter.Replayed)
	require.Len(t, res.DeadLetter.Replays, 2)
	assert.Equal(t, "api:alice", res.DeadLetter.Replays[1].By)
	assert.Equal(t, int64(3), e.shop.lockedQty(t), "applied once")
	assert.Empty(t, e.pending(t), "replayed: nothing left to act on")
	var replayed list
	require.Equal(t, http.StatusOK, e.call(t, http.MethodGet, "/v1/admin/deadletters?state=replayed", auth.Operator, &replayed))
	require.Len(t, replayed.DeadLetters, 1)

	require.Equal(t, http.StatusOK, e.call(t, http.MethodPost, path+"/replay", auth.Admin, &res))
	assert.True(t, res.AlreadyReplayed)
	assert.Len(t, res.DeadLetter.Replays, 3)
	assert.Equal(t, int64(3), e.shop.lockedQty(t), "the inbox: the second replay changes nothing")
}

// Roles: a viewer reads neither list nor dead letter, an operator reads but cannot replay, an
// admin replays; no token is 401. Nothing refused runs the handler.
func TestRolesOfTheDeadLetterEndpoints(t *testing.T) {
	e := setup(t)
	e.shop.known.Store(false)
	e.order(t, 2)
	require.Eventually(t, func() bool { return len(e.pending(t)) == 1 }, 10*time.Second, 50*time.Millisecond)
	seq := e.pending(t)[0].Seq
	e.shop.known.Store(true)
	show := fmt.Sprintf("/v1/admin/deadletters/%d", seq)
	replay := show + "/replay"

	for _, tc := range []struct {
		name   string
		method string
		path   string
		role   auth.Role
		want   int
	}{
		{"no token lists", http.MethodGet, "/v1/admin/deadletters", "", http.StatusUnauthorized},
		{"viewer lists", http.MethodGet, "/v1/admin/deadletters", auth.Viewer, http.StatusForbidden},
		{"viewer shows", http.MethodGet, show, auth.Viewer, http.StatusForbidden},
		{"buyer shows", http.MethodGet, show, auth.Buyer, http.StatusForbidden},
		{"no token replays", http.MethodPost, replay, "", http.StatusUnauthorized},
		{"viewer replays", http.MethodPost, replay, auth.Viewer, http.StatusForbidden},
		{"operator replays", http.MethodPost, replay, auth.Operator, http.StatusForbidden},
		{"approver replays", http.MethodPost, replay, auth.Approver, http.StatusForbidden},
		{"operator shows", http.MethodGet, show, auth.Operator, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, e.call(t, tc.method, tc.path, tc.role, nil))
		})
	}
	assert.Equal(t, int64(0), e.shop.lockedQty(t), "no refused replay ran the handler")
	assert.Equal(t, http.StatusOK, e.call(t, http.MethodPost, replay, auth.Admin, nil))
	assert.Equal(t, int64(2), e.shop.lockedQty(t))
}

// The errors of the table: a bad sequence, an unknown one, another service's dead letter or
// consumer, an advisory, bad list parameters; and requests for other routes pass through.
func TestDeadLetterErrors(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	other := nats.NewMsg(natsx.SubjectDeadLetterPrefix + events.SubjectOrderCreated)
	other.Data = []byte(`{}`)
	other.Header.Set(natsx.HeaderDLConsumer, "payment-adapter-order-created")
	other.Header.Set(natsx.HeaderDLSubject, events.SubjectOrderCreated)
	ack, err := e.js.PublishMsg(ctx, other)
	require.NoError(t, err)
	adv, err := e.js.Publish(ctx, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDER."+durable,
		[]byte(`{"stream":"ORDER","consumer":"`+durable+`","stream_seq":9,"deliveries":20}`))
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		method string
		path   string
		status int
		code   string
	}{
		{"not a number", http.MethodGet, "/v1/admin/deadletters/abc", http.StatusBadRequest, "invalid_sequence"},
		{"zero", http.MethodPost, "/v1/admin/deadletters/0/replay", http.StatusBadRequest, "invalid_sequence"},
		{"negative", http.MethodGet, "/v1/admin/deadletters/-1", http.StatusBadRequest, "invalid_sequence"},
		{"unknown", http.MethodGet, "/v1/admin/deadletters/999", http.StatusNotFound, "dead_letter_not_found"},
		{"unknown replay", http.MethodPost, "/v1/admin/deadletters/999/replay", http.StatusNotFound, "dead_letter_not_found"},
		{"another service's", http.MethodGet, fmt.Sprintf("/v1/admin/deadletters/%d", ack.Sequence), http.StatusConflict, "other_consumer"},
		{"another service's replay", http.MethodPost, fmt.Sprintf("/v1/admin/deadletters/%d/replay", ack.Sequence), http.StatusConflict, "other_consumer"},
		{"another service's consumer", http.MethodGet, "/v1/admin/deadletters?consumer=payment-adapter-order-created", http.StatusConflict, "other_consumer"},
		{"advisory replay", http.MethodPost, fmt.Sprintf("/v1/admin/deadletters/%d/replay", adv.Sequence), http.StatusConflict, "not_replayable"},
		{"bad limit", http.MethodGet, "/v1/admin/deadletters?limit=0", http.StatusBadRequest, "invalid_limit"},
		{"bad state", http.MethodGet, "/v1/admin/deadletters?state=done", http.StatusBadRequest, "invalid_state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b errBody
			assert.Equal(t, tc.status, e.call(t, tc.method, tc.path, auth.Admin, &b))
			assert.Equal(t, tc.code, b.Error.Code, b.Error.Message)
		})
	}
	var l list
	require.Equal(t, http.StatusOK, e.call(t, http.MethodGet, "/v1/admin/deadletters?consumer="+durable, auth.Admin, &l))
	require.Len(t, l.DeadLetters, 1, "only this service's, the advisory included")
	assert.Equal(t, natsx.KindAdvisory, l.DeadLetters[0].Kind)
	assert.Equal(t, []string{durable}, l.Consumers)
	assert.Equal(t, http.StatusTeapot, e.call(t, http.MethodGet, "/v1/other", auth.Admin, nil))
	assert.True(t, strings.HasPrefix(l.DeadLetters[0].Reason, "max_deliveries"))
}

// List is newest first and honours limit.
func TestListIsNewestFirstAndLimited(t *testing.T) {
	e := setup(t)
	for qty := int64(1); qty <= 3; qty++ {
		e.order(t, qty)
	}
	require.Eventually(t, func() bool { return len(e.pending(t)) == 3 }, 10*time.Second, 50*time.Millisecond)
	var l list
	require.Equal(t, http.StatusOK, e.call(t, http.MethodGet, "/v1/admin/deadletters?limit=2", auth.Operator, &l))
	require.Len(t, l.DeadLetters, 2)
	assert.Greater(t, l.DeadLetters[0].Seq, l.DeadLetters[1].Seq)
}
