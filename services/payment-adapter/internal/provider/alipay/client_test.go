package alipay_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay/alipaytest"
)

func refundOf(orderID, tradeNo, refundID string, amount int64) payment.RefundRequest {
	return payment.RefundRequest{
		RefundID: refundID, PaymentID: "pay-1", OrderID: orderID, ProviderTxnID: tradeNo,
		Amount: amount, Currency: "CNY", Reason: "库存不足",
	}
}

func TestRefundSucceedsOncePerRefundID(t *testing.T) {
	s, p := setup(t)
	ctx := context.Background()
	s.AddTrade("ord-1", "2026120322001400001", 9800, "TRADE_SUCCESS")
	r := refundOf("ord-1", "2026120322001400001", "refund-1", 9800)

	first, err := p.Refund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundResult{ProviderRefundID: "2026120322001400001:refund-1", Status: payment.RefundSucceeded}, first)

	again, err := p.Refund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, first, again, "fund_change N on the retry, confirmed by the refund query")
	assert.Equal(t, 1, s.Calls("alipay.trade.fastpay.refund.query"), "fund_change N is confirmed, Y is not")
	assert.Equal(t, 2, s.RefundCalls("refund-1"))
	assert.Equal(t, 1, s.Refunds(), "one out_request_no, one refund")
	rf, ok := s.Refund("refund-1")
	require.True(t, ok)
	assert.Equal(t, alipaytest.Refund{
		OutRequestNo: "refund-1", TradeNo: "2026120322001400001", OutTradeNo: "ord-1", Amount: 9800, Reason: "库存不足", At: rf.At,
	}, rf)

	queried, err := p.QueryRefund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, first, queried)

	_, err = p.Refund(ctx, refundOf("ord-1", "2026120322001400001", "refund-2", 9800))
	assert.ErrorIs(t, err, payment.ErrProviderRefused, "the money went back once; a second refund id is refused")
}

func TestRefundByOrderIDWhenTheTradeNoIsUnknown(t *testing.T) {
	s, p := setup(t)
	s.AddTrade("ord-1", "2026120322001400001", 9800, "TRADE_SUCCESS")
	res, err := p.Refund(context.Background(), refundOf("ord-1", "", "refund-1", 9800))
	require.NoError(t, err)
	assert.Equal(t, payment.RefundResult{ProviderRefundID: "2026120322001400001:refund-1", Status: payment.RefundSucceeded}, res)
}

func TestRefundErrors(t *testing.T) {
	paid := func(s *alipaytest.Server, orderID string) {
		s.AddTrade(orderID, "trade-"+orderID, 9800, "TRADE_SUCCESS")
	}
	fail := func(code, subCode string) func(*alipaytest.Server, string) {
		return func(s *alipaytest.Server, orderID string) {
			paid(s, orderID)
			s.FailNext(code, subCode, "alipaytest says "+subCode)
		}
	}
	tests := []struct {
		name    string
		prepare func(s *alipaytest.Server, orderID string)
		refused bool
	}{
		{"unknown trade", func(*alipaytest.Server, string) {}, true},
		{"trade not paid", func(s *alipaytest.Server, orderID string) {
			s.AddTrade(orderID, "trade-"+orderID, 9800, "WAIT_BUYER_PAY")
		}, true},
		{"trade finished", func(s *alipaytest.Server, orderID string) {
			s.AddTrade(orderID, "trade-"+orderID, 9800, "TRADE_FINISHED")
		}, true},
		{"more than was paid", func(s *alipaytest.Server, orderID string) {
			s.AddTrade(orderID, "trade-"+orderID, 9700, "TRADE_SUCCESS")
		}, true},
		{"ACQ.DISCORDANT_REPEAT_REQUEST", fail("40004", "ACQ.DISCORDANT_REPEAT_REQUEST"), true},
		{"ACQ.REASON_TRADE_BEEN_FREEZEN", fail("40004", "ACQ.REASON_TRADE_BEEN_FREEZEN"), true},
		{"ACQ.SYSTEM_ERROR", fail("40004", "ACQ.SYSTEM_ERROR"), false},
		{"aop.ACQ.SYSTEM_ERROR", fail("40004", "aop.ACQ.SYSTEM_ERROR"), false},
		{"seller balance not enough", fail("40004", "ACQ.SELLER_BALANCE_NOT_ENOUGH"), false},
		{"service unavailable", fail("20000", "isp.unknow-error"), false},
		{"insufficient permissions", fail("40006", "isv.insufficient-isv-permissions"), false},
		{"answer with a bad signature", func(s *alipaytest.Server, orderID string) {
			paid(s, orderID)
			s.BreakNextSignature()
		}, false},
		{"refusal with a bad signature", func(s *alipaytest.Server, _ string) {
			s.FailNext("40004", "ACQ.TRADE_NOT_EXIST", "forged")
			s.BreakNextSignature()
		}, false},
	}
	s, p := setup(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orderID := "ord-" + string(rune('a'+i))
			tc.prepare(s, orderID)
			_, err := p.Refund(context.Background(), refundOf(orderID, "trade-"+orderID, "refund-"+orderID, 9800))
			require.Error(t, err)
			assert.Equal(t, tc.refused, errors.Is(err, payment.ErrProviderRefused), "refused: %v", err)
		})
	}
}

func TestTransientErrorThenSuccess(t *testing.T) {
	s, p := setup(t)
	ctx := context.Background()
	s.AddTrade("ord-1", "2026120322001400001", 9800, "TRADE_SUCCESS")
	r := refundOf("ord-1", "2026120322001400001", "refund-1", 9800)
	s.BreakNextSignature()
	_, err := p.Refund(ctx, r)
	require.ErrorContains(t, err, "does not verify")
	res, err := p.Refund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundSucceeded, res.Status, "the unverified answer was a refund; the retry finds it")
	assert.Equal(t, 1, s.Refunds())
}

func TestCallsSignedWithAnotherAppKeyAreRejected(t *testing.T) {
	s := alipaytest.New(t)
	other := alipaytest.New(t)
	c := s.Config()
	c.AppPrivateKeyPEM = other.Config().AppPrivateKeyPEM
	p, err := alipay.New(c)
	require.NoError(t, err)
	s.AddTrade("ord-1", "2026120322001400001", 9800, "TRADE_SUCCESS")
	_, err = p.Refund(context.Background(), refundOf("ord-1", "2026120322001400001", "refund-1", 9800))
	require.Error(t, err)
	assert.NotErrorIs(t, err, payment.ErrProviderRefused, "a key the app can fix is not a refusal")
	assert.ErrorContains(t, err, "isv.invalid-signature")
	assert.Zero(t, s.RefundCalls("refund-1"))
}

func TestNetworkErrorsAreTransient(t *testing.T) {
	s := alipaytest.New(t)
	c := s.Config()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	c.GatewayURL = closed.URL
	p, err := alipay.New(c)
	require.NoError(t, err)
	ctx := context.Background()
	r := refundOf("ord-1", "2026120322001400001", "refund-1", 9800)
	_, err = p.Refund(ctx, r)
	assert.Error(t, err)
	assert.NotErrorIs(t, err, payment.ErrProviderRefused)
	_, err = p.QueryRefund(ctx, r)
	assert.Error(t, err)
	assert.NotErrorIs(t, err, payment.ErrNotFound)
	_, err = p.QueryPayment(ctx, "ord-1")
	assert.Error(t, err)
	assert.NotErrorIs(t, err, payment.ErrNotFound)
}

func TestQueryRefund(t *testing.T) {
	s, p := setup(t)
	ctx := context.Background()
	s.AddTrade("ord-1", "2026120322001400001", 9800, "TRADE_SUCCESS")
	r := refundOf("ord-1", "2026120322001400001", "refund-1", 9800)

	_, err := p.QueryRefund(ctx, r)
	assert.ErrorIs(t, err, payment.ErrNotFound, "never requested")
	_, err = p.QueryRefund(ctx, refundOf("ord-2", "2026120322001400002", "refund-2", 9800))
	assert.ErrorIs(t, err, payment.ErrNotFound, "no such trade")

	_, err = p.Refund(ctx, r)
	require.NoError(t, err)
	res, err := p.QueryRefund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundResult{ProviderRefundID: "2026120322001400001:refund-1", Status: payment.RefundSucceeded}, res)

	s.FailNext("40004", "ACQ.TRADE_NOT_EXIST", "forged")
	s.BreakNextSignature()
	_, err = p.QueryRefund(ctx, r)
	require.Error(t, err)
	assert.NotErrorIs(t, err, payment.ErrNotFound, "an unverified 'no such trade' is not believed")
}

func TestQueryPayment(t *testing.T) {
	s, p := setup(t)
	ctx := context.Background()

	h, body := s.PaymentNotification("ord-1", "2026120322001400001", 9800, "TRADE_SUCCESS")
	want, err := p.Verify(h, body)
	require.NoError(t, err)
	got, err := p.QueryPayment(ctx, "ord-1")
	require.NoError(t, err)
	assert.Equal(t, want, got, "a query is read as the notification would be")

	tests := []struct {
		status  string
		outcome payment.Outcome
		err     error
	}{
		{"TRADE_FINISHED", payment.OutcomeSucceeded, nil},
		{"TRADE_CLOSED", payment.OutcomeFailed, nil},
		{"WAIT_BUYER_PAY", payment.Outcome{}, payment.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.status, func(t *testing.T) {
			orderID := "ord-" + strings.ToLower(tc.status)
			s.AddTrade(orderID, "trade-"+orderID, 500, tc.status)
			n, err := p.QueryPayment(ctx, orderID)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.outcome, n.Outcome)
			assert.Equal(t, orderID, n.OrderID)
			assert.Equal(t, "trade-"+orderID, n.ProviderTxnID)
			assert.Equal(t, int64(500), n.Amount)
		})
	}

	_, err = p.QueryPayment(ctx, "ord-unknown")
	assert.ErrorIs(t, err, payment.ErrNotFound)

	s.BreakNextSignature()
	_, err = p.QueryPayment(ctx, "ord-1")
	require.Error(t, err)
	assert.NotErrorIs(t, err, payment.ErrNotFound)
}

// gateway is a hand-made gateway, independent of alipaytest: it records the last call's form
// and answers with answer, signed by key over sign (the raw object when sign is "").
type gateway struct {
	form         url.Values
	answer, sign string
	key          *rsa.PrivateKey
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.form = r.PostForm
	signed := g.sign
	if signed == "" {
		signed = g.answer
	}
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, g.key, crypto.SHA256, digest[:])
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte(`{"alipay_trade_query_response":` + g.answer + `,"sign":"` + base64.StdEncoding.EncodeToString(sig) + `"}`))
}

func handMade(t *testing.T) (*gateway, *alipay.Provider, alipay.Config) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pkix, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	g := &gateway{key: key}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	c := alipaytest.New(t).Config()
	c.AlipayPublicKeyPEM, c.GatewayURL = pemOf("PUBLIC KEY", pkix), srv.URL
	p, err := alipay.New(c)
	require.NoError(t, err)
	return g, p, c
}

// TestRequestFormAndSign checks a call against the protocol itself, not against the double:
// the common parameters, biz_content, and sign over the sorted parameters but sign with the
// app key.
func TestRequestFormAndSign(t *testing.T) {
	g, p, c := handMade(t)
	g.answer = `{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在"}`
	_, err := p.QueryPayment(context.Background(), "ord-1")
	require.ErrorIs(t, err, payment.ErrNotFound)

	f := g.form
	for k, want := range map[string]string{"app_id": c.AppID, "method": "alipay.trade.query", "format": "JSON", "charset": "utf-8", "sign_type": "RSA2", "version": "1.0"} {
		assert.Equal(t, want, f.Get(k), k)
	}
	assert.JSONEq(t, `{"out_trade_no":"ord-1"}`, f.Get("biz_content"))
	at, err := time.ParseInLocation("2006-01-02 15:04:05", f.Get("timestamp"), time.FixedZone("CST", 8*60*60))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), at, time.Minute, "timestamp is Beijing time")

	var keys []string
	for k := range f {
		if k != "sign" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var content []string
	for _, k := range keys {
		content = append(content, k+"="+f.Get(k))
	}
	block, _ := pem.Decode([]byte(c.AppPrivateKeyPEM))
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	sig, err := base64.StdEncoding.DecodeString(f.Get("sign"))
	require.NoError(t, err)
	digest := sha256.Sum256([]byte(strings.Join(content, "&")))
	assert.NoError(t, rsa.VerifyPKCS1v15(&key.(*rsa.PrivateKey).PublicKey, crypto.SHA256, digest[:], sig))
}

// TestResponseSignIsOverTheRawText: Alipay signs the *_response object as it sends it — its
// spacing, key order and escapes — so a verifier that re-encodes the object fails on any
// answer not already in Go's canonical form.
func TestResponseSignIsOverTheRawText(t *testing.T) {
	g, p, _ := handMade(t)
	g.answer = "{\"msg\": \"Success\", \"code\":\"10000\",\"trade_status\":\"TRADE_SUCCESS\",\"total_amount\":\"98.00\",\n" +
		`"trade_no":"2026120322001400001","out_trade_no":"ord-1","send_pay_date":"2026-12-03 18:30:00","buyer_logon_id":"159\u002a\u002a\u002a\u002a5620","subject":"订单"}`
	n, err := p.QueryPayment(context.Background(), "ord-1")
	require.NoError(t, err)
	assert.Equal(t, int64(9800), n.Amount)

	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(g.answer), &v))
	reencoded, err := json.Marshal(v)
	require.NoError(t, err)
	g.sign = string(reencoded)
	_, err = p.QueryPayment(context.Background(), "ord-1")
	require.ErrorContains(t, err, "does not verify", "signed over another text than the one sent")
}
