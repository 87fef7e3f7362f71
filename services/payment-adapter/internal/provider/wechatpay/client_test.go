package wechatpay_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/wechatpay"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/wechatpay/wechatpaytest"
)

func refundOf(orderID, txnID, refundID string, amount int64) payment.RefundRequest {
	return payment.RefundRequest{
		RefundID: refundID, PaymentID: "pay-1", OrderID: orderID, ProviderTxnID: txnID,
		Amount: amount, Currency: "CNY", Reason: "stock sold out",
	}
}

func TestRefundSucceedsOncePerRefundID(t *testing.T) {
	s, p := setup(t, time.Now())
	ctx := context.Background()
	s.AddTransaction("ord-1", "4200000001", 9800, "CNY", "SUCCESS")

	first, err := p.Refund(ctx, refundOf("ord-1", "4200000001", "refund-1", 9800))
	require.NoError(t, err)
	assert.Equal(t, payment.RefundSucceeded, first.Status)
	assert.NotEmpty(t, first.ProviderRefundID)

	again, err := p.Refund(ctx, refundOf("ord-1", "4200000001", "refund-1", 9800))
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, 2, s.RefundCalls("refund-1"))
	assert.Equal(t, 1, s.Refunds(), "one out_refund_no, one refund")
	rf, ok := s.Refund("refund-1")
	require.True(t, ok)
	assert.Equal(t, wechatpaytest.Refund{
		OutRefundNo: "refund-1", RefundID: first.ProviderRefundID, TransactionID: "4200000001", OutTradeNo: "ord-1",
		Amount: 9800, Total: 9800, Currency: "CNY", Reason: "stock sold out", Status: "SUCCESS", SuccessTime: rf.SuccessTime,
	}, rf)

	queried, err := p.QueryRefund(ctx, refundOf("ord-1", "4200000001", "refund-1", 9800))
	require.NoError(t, err)
	assert.Equal(t, first, queried)

	_, err = p.Refund(ctx, refundOf("ord-1", "4200000001", "refund-2", 9800))
	assert.ErrorIs(t, err, payment.ErrProviderRefused, "the money went back once; a second refund id is refused")
}

func TestRefundByOrderIDWhenTheTransactionIDIsUnknown(t *testing.T) {
	s, p := setup(t, time.Now())
	s.AddTransaction("ord-1", "4200000001", 9800, "CNY", "SUCCESS")
	res, err := p.Refund(context.Background(), refundOf("ord-1", "", "refund-1", 9800))
	require.NoError(t, err)
	assert.Equal(t, payment.RefundSucceeded, res.Status)
}

func TestRefundPendingThenCompleted(t *testing.T) {
	s, p := setup(t, time.Now())
	ctx := context.Background()
	s.AddTransaction("ord-1", "4200000001", 9800, "CNY", "SUCCESS")
	s.SetRefundStatus("PROCESSING")
	r := refundOf("ord-1", "4200000001", "refund-1", 9800)

	res, err := p.Refund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundPending, res.Status)
	res, err = p.QueryRefund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundPending, res.Status)

	h, body := s.CompleteRefund("refund-1")
	n, err := p.Verify(h, body)
	require.NoError(t, err)
	assert.Equal(t, &payment.RefundNotice{RefundID: "refund-1", ProviderRefundID: res.ProviderRefundID, Status: payment.RefundSucceeded}, n.Refund)

	done, err := p.QueryRefund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundResult{ProviderRefundID: res.ProviderRefundID, Status: payment.RefundSucceeded}, done)
	again, err := p.Refund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, done, again)
}

func TestRefundFailedByWeChatPay(t *testing.T) {
	s, p := setup(t, time.Now())
	for _, status := range []string{"ABNORMAL", "CLOSED"} {
		t.Run(status, func(t *testing.T) {
			s.AddTransaction("ord-"+status, "txn-"+status, 9800, "CNY", "SUCCESS")
			s.SetRefundStatus(status)
			res, err := p.Refund(context.Background(), refundOf("ord-"+status, "txn-"+status, "refund-"+status, 9800))
			require.NoError(t, err)
			assert.Equal(t, payment.RefundFailed, res.Status)
			assert.Equal(t, status, res.Reason)
		})
	}
}

func TestRefundErrors(t *testing.T) {
	paid := func(s *wechatpaytest.Server, orderID string) {
		s.AddTransaction(orderID, "txn-"+orderID, 9800, "CNY", "SUCCESS")
	}
	fail := func(status int, code string) func(*wechatpaytest.Server, string) {
		return func(s *wechatpaytest.Server, orderID string) {
			paid(s, orderID)
			s.FailNext(status, code, "wechatpaytest says "+code)
		}
	}
	tests := []struct {
		name    string
		prepare func(s *wechatpaytest.Server, orderID string)
		refused bool
	}{
		{"unknown transaction", func(*wechatpaytest.Server, string) {}, true},
		{"transaction not paid", func(s *wechatpaytest.Server, orderID string) {
			s.AddTransaction(orderID, "txn-"+orderID, 9800, "CNY", "CLOSED")
		}, true},
		{"amount is not the payment's", func(s *wechatpaytest.Server, orderID string) {
			s.AddTransaction(orderID, "txn-"+orderID, 9700, "CNY", "SUCCESS")
		}, true},
		{"PARAM_ERROR", fail(http.StatusBadRequest, "PARAM_ERROR"), true},
		{"INVALID_REQUEST", fail(http.StatusBadRequest, "INVALID_REQUEST"), true},
		{"USER_ACCOUNT_ABNORMAL", fail(http.StatusForbidden, "USER_ACCOUNT_ABNORMAL"), true},
		{"SYSTEM_ERROR", fail(http.StatusInternalServerError, "SYSTEM_ERROR"), false},
		{"FREQUENCY_LIMITED", fail(http.StatusTooManyRequests, "FREQUENCY_LIMITED"), false},
		{"NOT_ENOUGH balance", fail(http.StatusForbidden, "NOT_ENOUGH"), false},
		{"NO_AUTH", fail(http.StatusForbidden, "NO_AUTH"), false},
		{"bad gateway", fail(http.StatusBadGateway, "BAD_GATEWAY"), false},
		{"answer with a bad signature", func(s *wechatpaytest.Server, orderID string) {
			paid(s, orderID)
			s.BreakNextSignature()
		}, false},
		{"refusal with a bad signature", func(s *wechatpaytest.Server, _ string) {
			s.FailNext(http.StatusBadRequest, "INVALID_REQUEST", "forged")
			s.BreakNextSignature()
		}, false},
	}
	s, p := setup(t, time.Now())
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orderID := "ord-" + strconv.Itoa(i)
			tc.prepare(s, orderID)
			_, err := p.Refund(context.Background(), refundOf(orderID, "txn-"+orderID, "refund-"+orderID, 9800))
			require.Error(t, err)
			assert.Equal(t, tc.refused, errors.Is(err, payment.ErrProviderRefused), "refused: %v", err)
		})
	}
}

func TestTransientErrorsThenSuccess(t *testing.T) {
	s, p := setup(t, time.Now())
	ctx := context.Background()
	s.AddTransaction("ord-1", "4200000001", 9800, "CNY", "SUCCESS")
	r := refundOf("ord-1", "4200000001", "refund-1", 9800)
	s.BreakNextSignature()
	_, err := p.Refund(ctx, r)
	require.Error(t, err)
	assert.ErrorContains(t, err, "unverified")
	res, err := p.Refund(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, payment.RefundSucceeded, res.Status)
	assert.Equal(t, 1, s.Refunds(), "the unverified answer was a refund; the retry is the same one")
}

func TestRequestsSignedWithAnotherMerchantKeyAreRejected(t *testing.T) {
	s := wechatpaytest.New(t)
	other := wechatpaytest.New(t)
	c := s.Config()
	c.MerchantPrivateKeyPEM = other.Config().MerchantPrivateKeyPEM
	p, err := wechatpay.New(c)
	require.NoError(t, err)
	s.AddTransaction("ord-1", "4200000001", 9800, "CNY", "SUCCESS")
	_, err = p.Refund(context.Background(), refundOf("ord-1", "4200000001", "refund-1", 9800))
	require.Error(t, err)
	assert.NotErrorIs(t, err, payment.ErrProviderRefused, "a key the merchant can fix is not a refusal")
	assert.ErrorContains(t, err, "SIGN_ERROR")
	assert.Zero(t, s.RefundCalls("refund-1"))
}

func TestNetworkErrorsAreTransient(t *testing.T) {
	s := wechatpaytest.New(t)
	c := s.Config()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	c.BaseURL = closed.URL
	p, err := wechatpay.New(c)
	require.NoError(t, err)
	ctx := context.Background()
	r := refundOf("ord-1", "4200000001", "refund-1", 9800)
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

func TestQueryRefundNotFound(t *testing.T) {
	s, p := setup(t, time.Now())
	_, err := p.QueryRefund(context.Background(), refundOf("ord-1", "4200000001", "refund-1", 9800))
	assert.ErrorIs(t, err, payment.ErrNotFound)

	s.FailNext(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "forged")
	s.BreakNextSignature()
	_, err = p.QueryRefund(context.Background(), refundOf("ord-1", "4200000001", "refund-1", 9800))
	require.Error(t, err)
	assert.NotErrorIs(t, err, payment.ErrNotFound, "an unverified 404 is not believed")
}

func TestQueryPayment(t *testing.T) {
	now := time.Now()
	s, p := setup(t, now)
	ctx := context.Background()

	h, body := s.PaymentNotification("ord-1", "4200000001", 9800, "CNY", "SUCCESS")
	want, err := p.Verify(h, body)
	require.NoError(t, err)
	got, err := p.QueryPayment(ctx, "ord-1")
	require.NoError(t, err)
	assert.Equal(t, want, got, "a query is read as the callback would be")

	tests := []struct {
		state, txnID string
		outcome      payment.Outcome
		providerTxn  string
		err          error
	}{
		{"PAYERROR", "4200000002", payment.OutcomeFailed, "4200000002", nil},
		{"REVOKED", "4200000003", payment.OutcomeFailed, "4200000003", nil},
		{"CLOSED", "", payment.OutcomeFailed, "out_trade_no:ord-closed", nil},
		{"REFUND", "4200000004", payment.OutcomeSucceeded, "4200000004", nil},
		{"NOTPAY", "", payment.Outcome{}, "", payment.ErrNotFound},
		{"USERPAYING", "", payment.Outcome{}, "", payment.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.state, func(t *testing.T) {
			orderID := "ord-" + strings.ToLower(tc.state)
			s.AddTransaction(orderID, tc.txnID, 500, "CNY", tc.state)
			n, err := p.QueryPayment(ctx, orderID)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.outcome, n.Outcome)
			assert.Equal(t, tc.providerTxn, n.ProviderTxnID)
			assert.Equal(t, orderID, n.OrderID)
			assert.NoError(t, n.Validate())
		})
	}

	_, err = p.QueryPayment(ctx, "ord-unknown")
	assert.ErrorIs(t, err, payment.ErrNotFound)

	s.BreakNextSignature()
	_, err = p.QueryPayment(ctx, "ord-1")
	require.Error(t, err)
	assert.NotErrorIs(t, err, payment.ErrNotFound)
}

// TestAuthorizationHeader checks the request signature against the protocol itself, not
// against the double: the header's exact shape, and the signature over
// "METHOD\nURI\ntimestamp\nnonce\nbody\n" with the merchant key.
func TestAuthorizationHeader(t *testing.T) {
	s := wechatpaytest.New(t)
	c := s.Config()
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	c.BaseURL = srv.URL
	p, err := wechatpay.New(c)
	require.NoError(t, err)
	_, _ = p.QueryPayment(context.Background(), "ord-1")
	require.NotNil(t, got)
	assert.Equal(t, "/v3/pay/transactions/out-trade-no/ord-1?mchid="+wechatpaytest.MchID, got.RequestURI)
	checkAuthorization(t, c, got.Method, got.RequestURI, got.Header.Get("Authorization"), nil)

	_, _ = p.Refund(context.Background(), refundOf("ord-1", "4200000001", "refund-1", 9800))
	assert.Equal(t, "application/json", got.Header.Get("Content-Type"))
	assert.JSONEq(t, `{"transaction_id":"4200000001","out_refund_no":"refund-1","reason":"stock sold out","amount":{"refund":9800,"total":9800,"currency":"CNY"}}`, string(body))
	checkAuthorization(t, c, http.MethodPost, "/v3/refund/domestic/refunds", got.Header.Get("Authorization"), body)
}

func checkAuthorization(t *testing.T, c wechatpay.Config, method, uri, auth string, body []byte) {
	t.Helper()
	m := regexp.MustCompile(`^WECHATPAY2-SHA256-RSA2048 mchid="([^"]+)",nonce_str="([^"]+)",signature="([^"]+)",timestamp="([0-9]+)",serial_no="([^"]+)"$`).FindStringSubmatch(auth)
	require.NotNil(t, m, auth)
	assert.Equal(t, c.MchID, m[1])
	assert.Equal(t, c.MerchantSerialNo, m[5])
	ts, err := strconv.ParseInt(m[4], 10, 64)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), time.Unix(ts, 0), time.Minute)
	block, _ := pem.Decode([]byte(c.MerchantPrivateKeyPEM))
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	sig, err := base64.StdEncoding.DecodeString(m[3])
	require.NoError(t, err)
	digest := sha256.Sum256([]byte(method + "\n" + uri + "\n" + m[4] + "\n" + m[2] + "\n" + string(body) + "\n"))
	assert.NoError(t, rsa.VerifyPKCS1v15(&key.(*rsa.PrivateKey).PublicKey, crypto.SHA256, digest[:], sig))
}
