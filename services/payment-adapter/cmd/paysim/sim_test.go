package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// adapterStandIn verifies every callback it receives with the providers the adapter builds
// from paysim's env file, and keeps what they verified.
type adapterStandIn struct {
	providers map[string]payment.Provider
	mu        sync.Mutex
	verified  []payment.Notification
}

func (a *adapterStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/v1/callbacks/")
	p := a.providers[name]
	if !ok || p == nil {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	n, err := p.Verify(r.Header, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.verified = append(a.verified, n)
	a.mu.Unlock()
}

// seen is what the stand-in verified so far.
func (a *adapterStandIn) seen() []payment.Notification {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.verified)
}

// setup runs paysim as its main does — env file included — with callbacks going to a stand-in
// whose providers are built from that env file by the adapter's own config.
func setup(t *testing.T) (ctl string, adapter *adapterStandIn, providers map[string]payment.Provider) {
	t.Helper()
	adapter = &adapterStandIn{}
	callbacks := httptest.NewServer(adapter)
	t.Cleanup(callbacks.Close)
	sim, err := newSim(callbacks.URL)
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	ctlSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(ctlSrv.Close)

	envFile := filepath.Join(t.TempDir(), "paysim.env")
	require.NoError(t, writeEnv(envFile, append(sim.Env(), "PAYSIM_URL="+ctlSrv.URL)))
	info, err := os.Stat(envFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the env file holds keys")
	raw, err := os.ReadFile(envFile)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	assert.Contains(t, lines, "PAYSIM_URL="+ctlSrv.URL)
	cfg, err := config.Load(append(lines, "PAYMENT_SANDBOX_SECRET=x"))
	require.NoError(t, err, "the adapter takes paysim's env file as it is")
	ps, err := cfg.RealProviders()
	require.NoError(t, err)
	providers = map[string]payment.Provider{}
	for _, p := range ps {
		providers[p.Name()] = p
	}
	require.Len(t, providers, 3, "Stripe, WeChat Pay and Alipay are all configured")
	adapter.providers = providers
	return ctlSrv.URL, adapter, providers
}

func call(t *testing.T, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(b, out), "%s", b)
	}
	return resp.StatusCode
}

func TestPaymentsAreSignedAsEachProviderSignsThem(t *testing.T) {
	ctl, adapter, providers := setup(t)
	for i, name := range []string{"stripe", "wechatpay", "alipay"} {
		var res PaymentResult
		order := "ord-" + name
		require.Equal(t, http.StatusOK, call(t, "POST", ctl+"/"+name+"/payments",
			map[string]any{"order_id": order, "amount": 9800, "currency": "CNY"}, &res))
		require.NotNil(t, res.Delivered, name)
		assert.Equal(t, http.StatusOK, res.Delivered.Status, "%s: %s", name, res.Delivered.Body)
		require.Len(t, adapter.seen(), i+1)
		n := adapter.seen()[i]
		assert.Equal(t, name, n.Provider)
		assert.Equal(t, order, n.OrderID)
		assert.Equal(t, res.ProviderTxnID, n.ProviderTxnID)
		assert.Equal(t, int64(9800), n.Amount)
		assert.Equal(t, "CNY", n.Currency)
		assert.Equal(t, payment.OutcomeSucceeded, n.Outcome)

		// What the provider holds answers the adapter's query: a lost callback is found.
		q, err := providers[name].(payment.Querier).QueryPayment(context.Background(), order)
		require.NoError(t, err, name)
		assert.Equal(t, res.ProviderTxnID, q.ProviderTxnID, name)

		// The callback, tampered with, does not verify.
		tampered := res.Callback.Body + " " // one byte more than was signed
		_, err = providers[name].Verify(headerOf(res.Callback), []byte(tampered))
		require.ErrorIs(t, err, payment.ErrInvalidSignature, name)

		// Signed long ago, it has expired (Alipay's window is its retries', 26 h).
		var old Callback
		require.Equal(t, http.StatusOK, call(t, "POST", ctl+"/"+name+"/sign",
			map[string]any{"body": res.Callback.Body, "at": time.Now().Add(-27 * time.Hour)}, &old))
		_, err = providers[name].Verify(headerOf(&old), []byte(old.Body))
		require.ErrorIs(t, err, payment.ErrInvalidSignature, name)
	}
}

func headerOf(cb *Callback) http.Header {
	h := http.Header{}
	for k, v := range cb.Headers {
		h.Set(k, v)
	}
	return h
}

func TestALostCallbackIsNotDeliveredButIsFoundByQuery(t *testing.T) {
	ctl, adapter, providers := setup(t)
	var res PaymentResult
	require.Equal(t, http.StatusOK, call(t, "POST", ctl+"/wechatpay/payments",
		map[string]any{"order_id": "ord-lost", "amount": 500, "currency": "CNY", "deliver": false}, &res))
	assert.Nil(t, res.Delivered)
	assert.Empty(t, adapter.seen())
	n, err := providers["wechatpay"].(payment.Querier).QueryPayment(context.Background(), "ord-lost")
	require.NoError(t, err)
	assert.Equal(t, res.ProviderTxnID, n.ProviderTxnID)
}

func TestFailedPayments(t *testing.T) {
	ctl, adapter, _ := setup(t)
	var res PaymentResult
	require.Equal(t, http.StatusOK, call(t, "POST", ctl+"/stripe/payments",
		map[string]any{"order_id": "ord-f", "amount": 500, "currency": "usd", "outcome": "failed"}, &res))
	require.Len(t, adapter.seen(), 1)
	assert.Equal(t, payment.OutcomeFailed, adapter.seen()[0].Outcome)
	var wres PaymentResult
	require.Equal(t, http.StatusOK, call(t, "POST", ctl+"/wechatpay/payments",
		map[string]any{"order_id": "ord-w", "amount": 500, "currency": "CNY", "outcome": "failed"}, &wres))
	assert.Nil(t, wres.Callback, "WeChat Pay notifies successes only")
}

func TestRefundsGoThroughTheProvider(t *testing.T) {
	ctl, adapter, providers := setup(t)
	ctx := context.Background()
	for _, name := range []string{"stripe", "wechatpay"} {
		var res PaymentResult
		order := "ord-r-" + name
		require.Equal(t, http.StatusOK, call(t, "POST", ctl+"/"+name+"/payments",
			map[string]any{"order_id": order, "amount": 700, "currency": "CNY"}, &res))
		require.Equal(t, http.StatusOK, call(t, "POST", ctl+"/"+name+"/refund-status", map[string]any{"status": "pending"}, nil))
		rr := payment.RefundRequest{RefundID: "rf-" + name, OrderID: order, ProviderTxnID: res.ProviderTxnID, Amount: 700, Currency: "CNY", Reason: "test"}
		got, err := providers[name].(payment.Refunder).Refund(ctx, rr)
		require.NoError(t, err, name)
		assert.Equal(t, payment.RefundPending, got.Status, name)

		var refunds []RefundView
		require.Equal(t, http.StatusOK, call(t, "GET", ctl+"/"+name+"/refunds", nil, &refunds))
		require.Len(t, refunds, 1, name)
		assert.Equal(t, order, refunds[0].OrderID)
		assert.Equal(t, int64(700), refunds[0].Amount)

		var done PaymentResult
		before := len(adapter.seen())
		require.Equal(t, http.StatusOK, call(t, "POST", ctl+"/"+name+"/refunds/"+refunds[0].ProviderRefundID+"/complete", nil, &done))
		require.NotNil(t, done.Delivered)
		assert.Equal(t, http.StatusOK, done.Delivered.Status, done.Delivered.Body)
		require.Len(t, adapter.seen(), before+1)
		n := adapter.seen()[before]
		require.NotNil(t, n.Refund, name)
		assert.Equal(t, payment.RefundSucceeded, n.Refund.Status, name)
		got, err = providers[name].(payment.Refunder).QueryRefund(ctx, rr)
		require.NoError(t, err, name)
		assert.Equal(t, payment.RefundSucceeded, got.Status, name)
	}
}

func TestBadControlCallsAreRefused(t *testing.T) {
	ctl, adapter, _ := setup(t)
	for _, tc := range []struct {
		path string
		body any
		want int
	}{
		{"/paypal/payments", map[string]any{"order_id": "o", "amount": 1, "currency": "CNY"}, http.StatusNotFound},
		{"/stripe/payments", map[string]any{"amount": 1, "currency": "CNY"}, http.StatusBadRequest},
		{"/stripe/payments", map[string]any{"order_id": "o", "amount": 0, "currency": "CNY"}, http.StatusBadRequest},
		{"/alipay/payments", map[string]any{"order_id": "o", "amount": 1, "currency": "USD"}, http.StatusBadRequest},
		{"/stripe/payments", map[string]any{"order_id": "o", "amount": 1, "currency": "CNY", "tip": 1}, http.StatusBadRequest},
		{"/stripe/refunds/re_nope/complete", nil, http.StatusBadRequest},
		{"/alipay/refund-status", map[string]any{"status": "pending"}, http.StatusBadRequest},
	} {
		assert.Equal(t, tc.want, call(t, "POST", ctl+tc.path, tc.body, nil), tc.path)
	}
	assert.Empty(t, adapter.seen(), "nothing refused was delivered")
}
