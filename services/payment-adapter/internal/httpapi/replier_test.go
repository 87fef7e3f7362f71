package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// replying is a provider that expects answers of its own, as WeChat Pay and Alipay do: the
// sandbox's notifications under another name, {"event":…} as a kind the adapter ignores, and
// "success" or "fail <status>" as text.
type replying struct{ sb *sandbox.Provider }

func (replying) Name() string { return "replying" }

func (r replying) Verify(h http.Header, body []byte) (payment.Notification, error) {
	if bytes.HasPrefix(body, []byte(`{"event":`)) {
		if h.Get(sandbox.SignatureHeader) != r.sb.Sign(body) {
			return payment.Notification{}, payment.ErrInvalidSignature
		}
		return payment.Notification{}, fmt.Errorf("replying: %w", payment.ErrIgnoredNotification)
	}
	n, err := r.sb.Verify(h, body)
	n.Provider = "replying"
	return n, err
}

func (replying) Reply(status int, err error) (string, []byte) {
	if err != nil {
		return "text/plain; charset=utf-8", fmt.Appendf(nil, "fail %d", status)
	}
	return "text/plain; charset=utf-8", []byte("success")
}

func TestReplierAnswersInTheProvidersFormat(t *testing.T) {
	pool, _ := pgtest.New(t, paymentpg.Schemas()...)
	sb, err := sandbox.New(secret)
	require.NoError(t, err)
	reg, err := payment.NewRegistry(sb, replying{sb})
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	svc := app.New(paymentpg.New(pool), reg, log)
	srv := httptest.NewServer(httpapi.Handler(svc, log, pool.Ping, authtest.New(t).Verifier))
	t.Cleanup(srv.Close)
	require.NoError(t, svc.RememberOrder(context.Background(), inbox.Message{Consumer: "c", ID: "o"},
		events.OrderCreated{OrderID: "ord-1", Total: 9800, Currency: "CNY"}))

	post := func(provider string, body []byte, sig string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/callbacks/"+provider, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set(sandbox.SignatureHeader, sig)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n))
		return n
	}
	good := notification("txn-1", "ord-1", 9800, "CNY", "succeeded")
	tests := []struct {
		name     string
		body     []byte
		sig      string
		status   int
		answer   string
		payments int
	}{
		{"taken", good, sb.Sign(good), http.StatusOK, "success", 1},
		{"duplicate", good, sb.Sign(good), http.StatusOK, "success", 1},
		{"forged", good, "00", http.StatusUnauthorized, "fail 401", 1},
		{"malformed", []byte(`{"provider_txn_id":`), sb.Sign([]byte(`{"provider_txn_id":`)), http.StatusBadRequest, "fail 400", 1},
		{"order unknown", notification("txn-2", "ord-later", 9800, "CNY", "succeeded"),
			sb.Sign(notification("txn-2", "ord-later", 9800, "CNY", "succeeded")), http.StatusServiceUnavailable, "fail 503", 1},
		{"ignored kind", []byte(`{"event":"refund.created"}`), sb.Sign([]byte(`{"event":"refund.created"}`)), http.StatusOK, "success", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, ct, body := post("replying", tc.body, tc.sig)
			assert.Equal(t, tc.status, status)
			assert.Equal(t, "text/plain; charset=utf-8", ct)
			assert.Equal(t, tc.answer, body)
			assert.Equal(t, tc.payments, count())
		})
	}
	// The sandbox has no Replier: the adapter's JSON.
	status, ct, body := post("sandbox", good, "00")
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "application/json", ct)
	assert.Contains(t, body, `"invalid_signature"`)
}
