package alipay_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay/alipaytest"
)

// setup returns an Alipay double and the provider configured for it.
func setup(t *testing.T) (*alipaytest.Server, *alipay.Provider) {
	t.Helper()
	s := alipaytest.New(t)
	p, err := alipay.New(s.Config())
	require.NoError(t, err)
	return s, p
}

// notifyTime is t as a notify_time (Beijing time).
func notifyTime(t time.Time) string {
	return t.In(time.FixedZone("CST", 8*60*60)).Format(alipay.TimeLayout)
}

// paid is a TRADE_SUCCESS notification's parameters, notified now, for tests to bend.
func paid(orderID, tradeNo, total string) url.Values {
	return url.Values{
		"notify_time": {notifyTime(time.Now())}, "notify_type": {"trade_status_sync"}, "notify_id": {"ac05099524730693a8b330c5ecf72da9786"},
		"app_id": {alipaytest.AppID}, "charset": {"utf-8"}, "version": {"1.0"},
		"trade_no": {tradeNo}, "out_trade_no": {orderID}, "trade_status": {"TRADE_SUCCESS"},
		"seller_id": {alipaytest.SellerID}, "total_amount": {total}, "receipt_amount": {total},
		"gmt_create": {"2026-12-03 18:29:00"}, "gmt_payment": {"2026-12-03 18:30:00"},
		"subject": {"订单 a&b=c+d"}, "fund_bill_list": {`[{"amount":"` + total + `","fundChannel":"ALIPAYACCOUNT"}]`},
	}
}

// with returns a copy of f with k set to v (deleted when v is "-").
func with(f url.Values, kv ...string) url.Values {
	c := url.Values{}
	for k, vs := range f {
		c[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "-" {
			c.Del(kv[i])
		} else {
			c.Set(kv[i], kv[i+1])
		}
	}
	return c
}

func TestVerifyPaymentNotification(t *testing.T) {
	s, p := setup(t)
	h, body := s.Notification(paid("ord-1", "2026120322001400001", "98.00"))
	n, err := p.Verify(h, body)
	require.NoError(t, err)
	assert.Equal(t, payment.Notification{
		Provider: "alipay", ProviderTxnID: "2026120322001400001", OrderID: "ord-1", Amount: 9800, Currency: "CNY",
		Outcome: payment.OutcomeSucceeded, PaidAt: time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC),
	}, withUTC(n), "gmt_payment is Beijing time")

	h, body = s.PaymentNotification("ord-2", "2026120322001400002", 1, "TRADE_SUCCESS")
	n, err = p.Verify(h, body)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n.Amount)
	assert.WithinDuration(t, time.Now(), n.PaidAt, time.Minute)
}

func TestVerifyRefusesANotifyTimeOutsideTheRetryWindow(t *testing.T) {
	s, p := setup(t)
	for name, at := range map[string]time.Time{
		"older than Alipay retries": time.Now().Add(-alipay.MaxNotifyAge - time.Minute),
		"from the future":           time.Now().Add(alipay.Tolerance + time.Minute),
	} {
		h, body := s.Notification(with(paid("ord-1", "2026120322001400001", "98.00"), "notify_time", notifyTime(at)))
		_, err := p.Verify(h, body)
		require.ErrorIs(t, err, payment.ErrInvalidSignature, name)
	}
	for name, nt := range map[string]string{"missing": "-", "not Alipay's layout": time.Now().Format(time.RFC3339)} {
		h, body := s.Notification(with(paid("ord-1", "2026120322001400001", "98.00"), "notify_time", nt))
		_, err := p.Verify(h, body)
		require.ErrorIs(t, err, payment.ErrInvalidSignature, name)
	}
	h, body := s.Notification(with(paid("ord-1", "2026120322001400001", "98.00"), "notify_time", notifyTime(time.Now().Add(-25*time.Hour))))
	_, err := p.Verify(h, body)
	require.NoError(t, err, "Alipay's last retry, about 25 hours on, is genuine")
}

func TestVerifyTradeStatuses(t *testing.T) {
	s, p := setup(t)
	tests := []struct {
		status  string
		outcome payment.Outcome
		reason  string
		err     error
	}{
		{"TRADE_SUCCESS", payment.OutcomeSucceeded, "", nil},
		{"TRADE_FINISHED", payment.OutcomeSucceeded, "", nil},
		{"TRADE_CLOSED", payment.OutcomeFailed, "closed", nil},
		{"WAIT_BUYER_PAY", payment.Outcome{}, "", payment.ErrIgnoredNotification},
		{"TRADE_PAID", payment.Outcome{}, "", payment.ErrMalformedNotification},
		{"", payment.Outcome{}, "", payment.ErrMalformedNotification},
	}
	for _, tc := range tests {
		t.Run(tc.status, func(t *testing.T) {
			h, body := s.Notification(with(paid("ord-1", "2026120322001400001", "98.00"), "trade_status", tc.status))
			n, err := p.Verify(h, body)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.outcome, n.Outcome)
			assert.Equal(t, tc.reason, n.Reason)
		})
	}
}

func TestVerifyTransCurrency(t *testing.T) {
	s, p := setup(t)
	h, body := s.Notification(with(paid("ord-1", "2026120322001400001", "12.30"), "trans_currency", "USD"))
	n, err := p.Verify(h, body)
	require.NoError(t, err)
	assert.Equal(t, "USD", n.Currency)
	assert.Equal(t, int64(1230), n.Amount)
}

func TestVerifyRefusesWhatIsNotProvablyFromAlipay(t *testing.T) {
	s, p := setup(t)
	other := alipaytest.New(t)
	f := paid("ord-1", "2026120322001400001", "98.00")
	_, body := s.Notification(f)
	signed, err := url.ParseQuery(string(body))
	require.NoError(t, err)
	encode := func(v url.Values) []byte { return []byte(v.Encode()) }
	_, otherBody := other.Notification(f)
	tests := map[string][]byte{
		"empty body":                  nil,
		"not a form":                  []byte("sign=%zz"),
		"no sign":                     encode(with(signed, "sign", "-")),
		"empty sign":                  encode(with(signed, "sign", "")),
		"sign not base64":             encode(with(signed, "sign", "!!")),
		"no sign_type":                encode(with(signed, "sign_type", "-")),
		"sign_type RSA":               encode(with(signed, "sign_type", "RSA")),
		"signed with another key":     otherBody,
		"amount changed":              encode(with(signed, "total_amount", "0.01")),
		"status changed":              encode(with(signed, "trade_status", "TRADE_FINISHED")),
		"parameter added":             encode(with(signed, "refund_fee", "98.00")),
		"parameter removed":           encode(with(signed, "gmt_payment", "-")),
		"parameter repeated":          append(append([]byte{}, body...), []byte("&total_amount=98.00")...),
		"one byte of a value changed": []byte(strings.Replace(string(body), "ord-1", "ord-2", 1)),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := p.Verify(http.Header{}, b)
			assert.ErrorIs(t, err, payment.ErrInvalidSignature)
		})
	}
}

func TestVerifyLeavesEmptyParametersOutOfTheSignature(t *testing.T) {
	s, p := setup(t)
	_, body := s.Notification(with(paid("ord-1", "2026120322001400001", "98.00"), "passback_params", ""))
	_, err := p.Verify(http.Header{}, body)
	require.NoError(t, err)
	_, err = p.Verify(http.Header{}, append(body, "&body="...))
	assert.NoError(t, err, "an empty parameter is not signed, and means nothing")
}

func TestVerifyMalformedButAuthentic(t *testing.T) {
	s, p := setup(t)
	f := paid("ord-1", "2026120322001400001", "98.00")
	tests := map[string]url.Values{
		"other app_id":          with(f, "app_id", "2021000000000002"),
		"no app_id":             with(f, "app_id", "-"),
		"other seller_id":       with(f, "seller_id", "2088000000000002"),
		"amount with 3 decimal": with(f, "total_amount", "98.001"),
		"amount negative":       with(f, "total_amount", "-98.00"),
		"amount zero":           with(f, "total_amount", "0.00"),
		"no amount":             with(f, "total_amount", "-"),
		"gmt_payment not time":  with(f, "gmt_payment", "2026-12-03T18:30:00+08:00"),
		"no trade_no":           with(f, "trade_no", "-"),
		"no out_trade_no":       with(f, "out_trade_no", "-"),
		"refund without out_biz_no": with(f, "trade_status", "TRADE_CLOSED", "refund_fee", "98.00",
			"gmt_refund", "2026-12-03 19:00:00.000"),
		"refund with a bad refund_fee": with(f, "trade_status", "TRADE_CLOSED", "out_biz_no", "refund-1",
			"refund_fee", "98.0.0"),
		"refund of a trade waiting": with(f, "trade_status", "WAIT_BUYER_PAY", "out_biz_no", "refund-1"),
	}
	for name, params := range tests {
		t.Run(name, func(t *testing.T) {
			h, body := s.Notification(params)
			_, err := p.Verify(h, body)
			assert.ErrorIs(t, err, payment.ErrMalformedNotification)
		})
	}
}

func TestVerifySellerIsOptional(t *testing.T) {
	s := alipaytest.New(t)
	c := s.Config()
	c.SellerID = ""
	p, err := alipay.New(c)
	require.NoError(t, err)
	h, body := s.Notification(with(paid("ord-1", "2026120322001400001", "98.00"), "seller_id", "2088000000000002"))
	_, err = p.Verify(h, body)
	assert.NoError(t, err)
}

func TestVerifyRefundNotification(t *testing.T) {
	s, p := setup(t)
	s.AddTrade("ord-1", "2026120322001400001", 9800, "TRADE_SUCCESS")
	h, body := s.RefundNotification("ord-1", "2026120322001400001", "refund-1", 9800)
	n, err := p.Verify(h, body)
	require.NoError(t, err)
	assert.Equal(t, payment.Notification{
		Provider: "alipay", ProviderTxnID: "2026120322001400001", OrderID: "ord-1",
		Refund: &payment.RefundNotice{RefundID: "refund-1", ProviderRefundID: "2026120322001400001:refund-1", Status: payment.RefundSucceeded},
	}, n)

	f := with(paid("ord-1", "2026120322001400001", "98.00"), "out_biz_no", "refund-2", "refund_fee", "10.00")
	h, body = s.Notification(f)
	n, err = p.Verify(h, body)
	require.NoError(t, err)
	require.NotNil(t, n.Refund, "a partial refund's notification says TRADE_SUCCESS with refund fields")
	assert.Equal(t, "refund-2", n.Refund.RefundID)
}

func TestParseAmount(t *testing.T) {
	valid := map[string]int64{
		"0.01": 1, "10": 1000, "10.5": 1050, "10.50": 1050, "98.00": 9800, "0": 0, "0.5": 50,
		"999999999999999.99": 99999999999999999,
	}
	for s, want := range valid {
		got, err := alipay.ParseAmount(s)
		if assert.NoError(t, err, s) {
			assert.Equal(t, want, got, s)
		}
	}
	for _, s := range []string{
		"-1", "1.234", "1e3", "", " 1", "1 ", "10.", ".5", "01", "00.01", "+1", "1,000.00", "1.2.3",
		"1000000000000000", "１", "0x10", "NaN", "10.5 ", "1_000",
	} {
		_, err := alipay.ParseAmount(s)
		assert.Error(t, err, "%q", s)
	}
}

func TestFormatAmount(t *testing.T) {
	for fen, want := range map[int64]string{1: "0.01", 10: "0.10", 100: "1.00", 1050: "10.50", 123456: "1234.56"} {
		assert.Equal(t, want, alipay.FormatAmount(fen))
		back, err := alipay.ParseAmount(want)
		require.NoError(t, err)
		assert.Equal(t, fen, back)
	}
}

func TestReply(t *testing.T) {
	p := &alipay.Provider{}
	for status, want := range map[int]string{200: "success", 204: "success", 400: "fail", 401: "fail", 500: "fail"} {
		ct, body := p.Reply(status, nil)
		assert.Equal(t, "text/plain; charset=utf-8", ct)
		assert.Equal(t, want, string(body), "status %d", status)
	}
}

func TestNewValidatesTheConfig(t *testing.T) {
	s := alipaytest.New(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	pkix, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	bend := func(f func(*alipay.Config)) alipay.Config {
		c := s.Config()
		f(&c)
		return c
	}
	valid := map[string]alipay.Config{
		"the double's":     s.Config(),
		"bare base64 keys": bend(func(c *alipay.Config) { c.AppPrivateKeyPEM, c.AlipayPublicKeyPEM = b64(pkcs8), b64(pkix) }),
		"PKCS #1 private key": bend(func(c *alipay.Config) {
			c.AppPrivateKeyPEM = pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
		}),
		"bare PKCS #1 key": bend(func(c *alipay.Config) { c.AppPrivateKeyPEM = b64(x509.MarshalPKCS1PrivateKey(key)) }),
		"PKCS #1 public key": bend(func(c *alipay.Config) {
			c.AlipayPublicKeyPEM = pemOf("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&key.PublicKey))
		}),
		"default gateway":         bend(func(c *alipay.Config) { c.GatewayURL = "" }),
		"own HTTP client and now": bend(func(c *alipay.Config) { c.HTTPClient, c.Now = http.DefaultClient, time.Now }),
	}
	for name, c := range valid {
		t.Run(name, func(t *testing.T) {
			_, err := alipay.New(c)
			assert.NoError(t, err)
		})
	}
	invalid := map[string]struct {
		c    alipay.Config
		says string
	}{
		"no app id":            {bend(func(c *alipay.Config) { c.AppID = "" }), "AppID"},
		"no app key":           {bend(func(c *alipay.Config) { c.AppPrivateKeyPEM = "" }), "AppPrivateKeyPEM"},
		"app key a public key": {bend(func(c *alipay.Config) { c.AppPrivateKeyPEM = pemOf("PUBLIC KEY", pkix) }), "AppPrivateKeyPEM"},
		"app key of 1024 bits": {bend(func(c *alipay.Config) {
			c.AppPrivateKeyPEM = pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(small))
		}), "shorter than 2048"},
		"no Alipay key":            {bend(func(c *alipay.Config) { c.AlipayPublicKeyPEM = "" }), "AlipayPublicKeyPEM"},
		"Alipay key a private key": {bend(func(c *alipay.Config) { c.AlipayPublicKeyPEM = pemOf("PRIVATE KEY", pkcs8) }), "AlipayPublicKeyPEM"},
		"Alipay key not base64":    {bend(func(c *alipay.Config) { c.AlipayPublicKeyPEM = "MIIB…" }), "AlipayPublicKeyPEM"},
		"gateway not a URL":        {bend(func(c *alipay.Config) { c.GatewayURL = "openapi.alipay.com/gateway.do" }), "GatewayURL"},
	}
	for name, tc := range invalid {
		t.Run(name, func(t *testing.T) {
			_, err := alipay.New(tc.c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

func b64(der []byte) string { return base64.StdEncoding.EncodeToString(der) }

func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

// withUTC returns n with PaidAt in UTC, so that it compares with assert.Equal.
func withUTC(n payment.Notification) payment.Notification {
	n.PaidAt = n.PaidAt.UTC()
	return n
}
