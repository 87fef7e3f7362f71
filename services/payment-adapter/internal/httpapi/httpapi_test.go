package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/httpapi"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	paymentpg "github.com/stockflow/stockflow/services/payment-adapter/internal/postgres"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
)

const secret = "httpapi-test-secret"

type env struct {
	t    *testing.T
	pool *pgxpool.Pool
	svc  *app.Service
	srv  *httptest.Server
	sb   *sandbox.Provider
	kit  *authtest.Kit
}

func setup(t *testing.T) *env {
	t.Helper()
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	sb, err := sandbox.New(secret)
	require.NoError(t, err)
	reg, err := payment.NewRegistry(sb)
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	svc := app.New(paymentpg.New(pool), reg, log)
	kit := authtest.New(t)
	srv := httptest.NewServer(httpapi.Handler(svc, log, pool.Ping, kit.Verifier))
	t.Cleanup(srv.Close)
	return &env{t: t, pool: pool, svc: svc, srv: srv, sb: sb, kit: kit}
}

// order makes the order known, as consuming its order.created does.
func (e *env) order(id string, total int64, currency string) {
	e.t.Helper()
	err := e.svc.RememberOrder(context.Background(), inbox.Message{Consumer: "test", ID: "created-" + id},
		events.OrderCreated{OrderID: id, Total: total, Currency: currency})
	require.NoError(e.t, err)
}

func notification(txn, order string, amount int64, currency, status string) []byte {
	return fmt.Appendf(nil, `{"provider_txn_id":%q,"order_id":%q,"amount":%d,"currency":%q,"status":%q}`, txn, order, amount, currency, status)
}

func (e *env) post(path string, body []byte, header map[string]string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return e.do(req)
}

func (e *env) get(path string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", e.kit.Bearer("vera", auth.Viewer))
	return e.do(req)
}

func (e *env) do(req *http.Request) (int, map[string]any) {
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func (e *env) pay(body []byte) (int, map[string]any) {
	return e.post("/v1/callbacks/sandbox", body, map[string]string{sandbox.SignatureHeader: e.sb.Sign(body)})
}

func errCode(body map[string]any) string {
	m, _ := body["error"].(map[string]any)
	s, _ := m["code"].(string)
	return s
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// outbox returns the subjects of the outbox rows, oldest first, and their decoded data.
func (e *env) outbox() (subjects []string, data []map[string]any) {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT subject, data FROM outbox ORDER BY id`)
	require.NoError(e.t, err)
	defer rows.Close()
	for rows.Next() {
		var s string
		var b []byte
		require.NoError(e.t, rows.Scan(&s, &b))
		env, err := events.Open(b)
		require.NoError(e.t, err)
		var d map[string]any
		require.NoError(e.t, json.Unmarshal(env.Data, &d))
		subjects, data = append(subjects, s), append(data, d)
	}
	require.NoError(e.t, rows.Err())
	return subjects, data
}

// drive runs the second step of every refund requested so far, as the
// payment-adapter-refund-requested consumer does.
func (e *env) drive() {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT data FROM outbox WHERE subject = $1 ORDER BY id`, events.SubjectPaymentRefundRequested)
	require.NoError(e.t, err)
	var evs []events.PaymentRefundRequested
	for rows.Next() {
		var b []byte
		require.NoError(e.t, rows.Scan(&b))
		_, ev, err := events.Decode[events.PaymentRefundRequested](b)
		require.NoError(e.t, err)
		evs = append(evs, ev)
	}
	require.NoError(e.t, rows.Err())
	rows.Close()
	for _, ev := range evs {
		require.NoError(e.t, e.svc.ExecuteRefund(context.Background(), inbox.Message{Consumer: "test", ID: "x"}, ev))
	}
}

func (e *env) nothingStored() {
	e.t.Helper()
	assert.Zero(e.t, e.count(`SELECT count(*) FROM payments`), "no payment stored")
	assert.Zero(e.t, e.count(`SELECT count(*) FROM outbox`), "no event written")
}

func TestGoodSignatureRecordsPaymentAndPaymentSucceeded(t *testing.T) {
	e := setup(t)
	e.order("ord-1", 9800, "CNY")
	status, body := e.pay(notification("txn-1", "ord-1", 9800, "CNY", "succeeded"))
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Equal(t, "succeeded", body["status"])
	assert.Equal(t, false, body["duplicate"])

	subjects, data := e.outbox()
	require.Equal(t, []string{events.SubjectPaymentSucceeded}, subjects)
	assert.Equal(t, body["payment_id"], data[0]["payment_id"])
	assert.Equal(t, "ord-1", data[0]["order_id"])
	assert.Equal(t, "txn-1", data[0]["provider_txn_id"])
	assert.EqualValues(t, 9800, data[0]["amount"])

	status, got := e.get("/v1/payments/" + body["payment_id"].(string))
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "succeeded", got["status"])
	assert.Equal(t, "sandbox", got["provider"])
}

func TestSignatureProblemsAre401AndStoreNothing(t *testing.T) {
	e := setup(t)
	e.order("ord-1", 9800, "CNY")
	body := notification("txn-1", "ord-1", 9800, "CNY", "succeeded")
	other, err := sandbox.New("not-the-secret")
	require.NoError(t, err)
	for name, header := range map[string]map[string]string{
		"missing":      nil,
		"empty":        {sandbox.SignatureHeader: ""},
		"not hex":      {sandbox.SignatureHeader: "xyz"},
		"wrong secret": {sandbox.SignatureHeader: other.Sign(body)},
		"other body":   {sandbox.SignatureHeader: e.sb.Sign(notification("txn-1", "ord-1", 1, "CNY", "succeeded"))},
	} {
		t.Run(name, func(t *testing.T) {
			status, resp := e.post("/v1/callbacks/sandbox", body, header)
			assert.Equal(t, http.StatusUnauthorized, status)
			assert.Equal(t, "invalid_signature", errCode(resp))
			e.nothingStored()
		})
	}
}

func TestUnknownProviderIs404(t *testing.T) {
	e := setup(t)
	e.order("ord-1", 9800, "CNY")
	body := notification("txn-1", "ord-1", 9800, "CNY", "succeeded")
	status, resp := e.post("/v1/callbacks/stripe", body, map[string]string{sandbox.SignatureHeader: e.sb.Sign(body)})
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "unknown_provider", errCode(resp))
	e.nothingStored()
}

func TestMalformedBodiesAre4xxAndStoreNothing(t *testing.T) {
	e := setup(t)
	e.order("ord-1", 9800, "CNY")
	big := append([]byte(`{"provider_txn_id":"`), bytes.Repeat([]byte("x"), 1<<20)...)
	tests := []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"not json", []byte(`{"provider_txn_id":`), http.StatusBadRequest, "malformed_notification"},
		{"unknown field", []byte(`{"provider_txn_id":"t","order_id":"ord-1","amount":9800,"currency":"CNY","status":"succeeded","extra":1}`), http.StatusBadRequest, "malformed_notification"},
		{"missing field", []byte(`{"provider_txn_id":"t","order_id":"ord-1","currency":"CNY","status":"succeeded"}`), http.StatusBadRequest, "malformed_notification"},
		{"bad status", notification("t", "ord-1", 9800, "CNY", "maybe"), http.StatusBadRequest, "malformed_notification"},
		{"negative amount", notification("t", "ord-1", -1, "CNY", "succeeded"), http.StatusBadRequest, "malformed_notification"},
		{"over 1 MiB", big, http.StatusRequestEntityTooLarge, "body_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, resp := e.pay(tc.body)
			assert.Equal(t, tc.status, status, "%v", resp)
			assert.Equal(t, tc.code, errCode(resp))
			e.nothingStored()
		})
	}
}

func TestDuplicateCallbackIsOneRowOneEvent(t *testing.T) {
	e := setup(t)
	e.order("ord-1", 9800, "CNY")
	body := notification("txn-dup", "ord-1", 9800, "CNY", "succeeded")
	_, first := e.pay(body)

	// Sequential repeats, then concurrent ones: the provider retries, and may do so in parallel.
	for range 2 {
		status, resp := e.pay(body)
		require.Equal(t, http.StatusOK, status)
		assert.Equal(t, true, resp["duplicate"])
		assert.Equal(t, first["payment_id"], resp["payment_id"])
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			status, _ := e.pay(body)
			assert.Equal(t, http.StatusOK, status)
		})
	}
	wg.Wait()
	// A conflicting repeat (same txn id, other amount) is acknowledged and changes nothing.
	status, resp := e.pay(notification("txn-dup", "ord-1", 1, "CNY", "failed"))
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "succeeded", resp["status"])

	assert.Equal(t, 1, e.count(`SELECT count(*) FROM payments`))
	subjects, _ := e.outbox()
	assert.Equal(t, []string{events.SubjectPaymentSucceeded}, subjects)
}

func TestConcurrentFirstCallbacksMakeOnePayment(t *testing.T) {
	e := setup(t)
	e.order("ord-1", 9800, "CNY")
	body := notification("txn-race", "ord-1", 9800, "CNY", "succeeded")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[any]int{}
	for range 16 {
		wg.Go(func() {
			status, resp := e.pay(body)
			assert.Equal(t, http.StatusOK, status, "%v", resp)
			mu.Lock()
			ids[resp["payment_id"]]++
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Len(t, ids, 1, "every caller sees the one payment")
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM payments`))
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM outbox`))
}

// TestMismatchNeverPaysAndIsRefunded (F11): a succeeded payment of the wrong amount or
// currency — 1 fen for a 4,900-fen order — announces payment.failed, never payment.succeeded,
// and the money the provider took goes back: its refund is requested with the payment and
// made by the second step; a redelivery changes nothing more.
func TestMismatchNeverPaysAndIsRefunded(t *testing.T) {
	tests := []struct {
		name     string
		amount   int64
		currency string
		reason   string
	}{
		{"one fen for 4900", 1, "CNY", payment.ReasonAmountMismatch},
		{"more than the total", 4901, "CNY", payment.ReasonAmountMismatch},
		{"currency", 4900, "EUR", payment.ReasonCurrencyMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			e.order("ord-1", 4900, "CNY")
			body := notification("txn-1", "ord-1", tc.amount, tc.currency, "succeeded")
			status, resp := e.pay(body)
			require.Equal(t, http.StatusOK, status, "%v", resp)
			assert.Equal(t, "failed", resp["status"])
			subjects, data := e.outbox()
			require.Equal(t, []string{events.SubjectPaymentFailed, events.SubjectPaymentRefundRequested}, subjects,
				"never payment.succeeded, and no payment.refunded for the order")
			assert.Equal(t, tc.reason, data[0]["reason"])
			_, got := e.get("/v1/payments/" + resp["payment_id"].(string))
			refund, _ := got["refund"].(map[string]any)
			assert.Equal(t, "requested", refund["status"])

			e.drive()
			_, got = e.get("/v1/payments/" + resp["payment_id"].(string))
			assert.Equal(t, "refunded", got["status"])
			refund, _ = got["refund"].(map[string]any)
			assert.Equal(t, "succeeded", refund["status"])
			assert.Equal(t, tc.reason, refund["reason"], "the refund says why")
			assert.Equal(t, "sandbox-refund-"+resp["payment_id"].(string), refund["provider_refund_id"])
			assert.NotEmpty(t, refund["refunded_at"])

			status, again := e.pay(body)
			require.Equal(t, http.StatusOK, status, "%v", again)
			assert.Equal(t, true, again["duplicate"])
			assert.Equal(t, "refunded", again["status"])
			subjects, _ = e.outbox()
			assert.Len(t, subjects, 2, "the redelivery emits nothing")
		})
	}
}

func TestProviderFailureIsPaymentFailed(t *testing.T) {
	e := setup(t)
	e.order("ord-1", 9800, "CNY")
	status, resp := e.pay(notification("txn-1", "ord-1", 9800, "CNY", "failed"))
	require.Equal(t, http.StatusOK, status, "%v", resp)
	subjects, data := e.outbox()
	require.Equal(t, []string{events.SubjectPaymentFailed}, subjects)
	assert.Equal(t, payment.ReasonDeclined, data[0]["reason"])
}

func TestOrderUnknownIs503AndStoresNothing(t *testing.T) {
	e := setup(t)
	body := notification("txn-1", "ord-later", 9800, "CNY", "succeeded")
	status, resp := e.pay(body)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "order_unknown", errCode(resp))
	e.nothingStored()

	// The provider retries once order.created has arrived: now it is recorded.
	e.order("ord-later", 9800, "CNY")
	status, resp = e.pay(body)
	require.Equal(t, http.StatusOK, status, "%v", resp)
	assert.Equal(t, "succeeded", resp["status"])
}

func TestListPaymentsOfAnOrder(t *testing.T) {
	e := setup(t)
	e.order("ord-1", 9800, "CNY")
	e.order("ord-2", 100, "CNY")
	e.pay(notification("txn-a", "ord-1", 1, "CNY", "succeeded"))
	time.Sleep(2 * time.Millisecond) // distinct created_at: the list is oldest first
	e.pay(notification("txn-b", "ord-1", 9800, "CNY", "succeeded"))
	e.pay(notification("txn-c", "ord-2", 100, "CNY", "succeeded"))
	e.drive()

	status, resp := e.get("/v1/payments?order_id=ord-1")
	require.Equal(t, http.StatusOK, status)
	ps := resp["payments"].([]any)
	require.Len(t, ps, 2)
	assert.Equal(t, "txn-a", ps[0].(map[string]any)["provider_txn_id"])
	assert.Equal(t, "refunded", ps[0].(map[string]any)["status"], "1 fen of 9800: given back")
	assert.Equal(t, "txn-b", ps[1].(map[string]any)["provider_txn_id"])

	status, resp = e.get("/v1/payments?order_id=none")
	require.Equal(t, http.StatusOK, status)
	assert.Empty(t, resp["payments"])

	status, resp = e.get("/v1/payments")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "missing_order_id", errCode(resp))

	status, resp = e.get("/v1/payments/no-such-payment")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "payment_not_found", errCode(resp))
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	e := setup(t)
	status, _ := e.get("/healthz")
	assert.Equal(t, http.StatusOK, status)
	status, _ = e.get("/readyz")
	assert.Equal(t, http.StatusOK, status)
	status, resp := e.get("/v1/nope")
	assert.Equal(t, http.StatusNotFound, status)
	assert.True(t, strings.HasSuffix(errCode(resp), "not_found"))
}
