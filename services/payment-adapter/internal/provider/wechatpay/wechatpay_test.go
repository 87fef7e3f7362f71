package wechatpay_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/wechatpay"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/wechatpay/wechatpaytest"
)

// setup returns a WeChat Pay double and the provider configured for it, with the clock at now.
func setup(t *testing.T, now time.Time) (*wechatpaytest.Server, *wechatpay.Provider) {
	t.Helper()
	s := wechatpaytest.New(t)
	c := s.Config()
	c.Now = func() time.Time { return now }
	p, err := wechatpay.New(c)
	require.NoError(t, err)
	return s, p
}

// transaction is a decrypted TRANSACTION.SUCCESS resource, for tests to bend.
func transaction(orderID, txnID string, total int64, tradeState string) map[string]any {
	return map[string]any{
		"mchid": wechatpaytest.MchID, "appid": wechatpaytest.AppID, "out_trade_no": orderID,
		"transaction_id": txnID, "trade_type": "NATIVE", "trade_state": tradeState,
		"success_time": "2026-12-03T18:30:00+08:00", "payer": map[string]string{"openid": "o1"},
		"amount": map[string]any{"total": total, "payer_total": total, "currency": "CNY", "payer_currency": "CNY"},
	}
}

func TestVerifyPaymentNotification(t *testing.T) {
	now := time.Now()
	s, p := setup(t, now)

	h, body := s.Notification("TRANSACTION.SUCCESS", transaction("ord-1", "4200000001", 9800, "SUCCESS"), now)
	n, err := p.Verify(h, body)
	require.NoError(t, err)
	assert.Equal(t, payment.Notification{
		Provider: "wechatpay", ProviderTxnID: "4200000001", OrderID: "ord-1", Amount: 9800, Currency: "CNY",
		Outcome: payment.OutcomeSucceeded, PaidAt: time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC),
	}, withUTC(n))

	h, body = s.PaymentNotification("ord-2", "4200000002", 100, "CNY", "SUCCESS")
	n, err = p.Verify(h, body)
	require.NoError(t, err)
	assert.Equal(t, "4200000002", n.ProviderTxnID)
	assert.Equal(t, int64(100), n.Amount)
	assert.WithinDuration(t, time.Now(), n.PaidAt, time.Minute)
}

func TestVerifyPaymentOutcomes(t *testing.T) {
	now := time.Now()
	s, p := setup(t, now)
	tests := []struct {
		state   string
		outcome payment.Outcome
		reason  string
		err     error
	}{
		{"SUCCESS", payment.OutcomeSucceeded, "", nil},
		{"REFUND", payment.OutcomeSucceeded, "", nil},
		{"PAYERROR", payment.OutcomeFailed, "PAYERROR", nil},
		{"CLOSED", payment.OutcomeFailed, "CLOSED", nil},
		{"REVOKED", payment.OutcomeFailed, "REVOKED", nil},
		{"NOTPAY", payment.Outcome{}, "", payment.ErrIgnoredNotification},
		{"USERPAYING", payment.Outcome{}, "", payment.ErrIgnoredNotification},
		{"PAID", payment.Outcome{}, "", payment.ErrMalformedNotification},
	}
	for _, tc := range tests {
		t.Run(tc.state, func(t *testing.T) {
			h, body := s.Notification("TRANSACTION.SUCCESS", transaction("ord-1", "4200000001", 9800, tc.state), now)
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

func TestVerifyRefusesWhatIsNotProvablyFromWeChatPay(t *testing.T) {
	now := time.Now()
	s, p := setup(t, now)
	other := wechatpaytest.New(t)
	res := transaction("ord-1", "4200000001", 9800, "SUCCESS")
	h, body := s.Notification("TRANSACTION.SUCCESS", res, now)
	without := func(name string) http.Header {
		c := h.Clone()
		c.Del(name)
		return c
	}
	with := func(name, v string) http.Header {
		c := h.Clone()
		c.Set(name, v)
		return c
	}
	otherH, otherBody := other.Notification("TRANSACTION.SUCCESS", res, now)
	otherKeyOurSerial := otherH.Clone()
	otherKeyOurSerial.Set(wechatpay.HeaderSerial, s.Serial())
	tampered := []byte(strings.Replace(string(body), `"ciphertext":"`, `"ciphertext":"A`, 1))
	oneByte := append([]byte{}, body...)
	oneByte[len(oneByte)/2] ^= 1
	expiredH, expiredBody := s.Notification("TRANSACTION.SUCCESS", res, now.Add(-wechatpay.Tolerance-time.Second))
	futureH, futureBody := s.Notification("TRANSACTION.SUCCESS", res, now.Add(wechatpay.Tolerance+time.Second))
	tests := []struct {
		name   string
		header http.Header
		body   []byte
	}{
		{"no timestamp", without(wechatpay.HeaderTimestamp), body},
		{"no nonce", without(wechatpay.HeaderNonce), body},
		{"no signature", without(wechatpay.HeaderSignature), body},
		{"no serial", without(wechatpay.HeaderSerial), body},
		{"no headers", http.Header{}, body},
		{"unknown serial", otherH, otherBody},
		{"another key under our serial", otherKeyOurSerial, otherBody},
		{"signature not base64", with(wechatpay.HeaderSignature, "!!"), body},
		{"signature of another body", with(wechatpay.HeaderSignature, s.Sign([]byte("{}"), now).Get(wechatpay.HeaderSignature)), body},
		{"WeChat Pay's signature probe", with(wechatpay.HeaderSignature, "WECHATPAY/SIGNTEST/"+h.Get(wechatpay.HeaderSignature)), body},
		{"nonce changed", with(wechatpay.HeaderNonce, "x"+h.Get(wechatpay.HeaderNonce)), body},
		{"timestamp changed", with(wechatpay.HeaderTimestamp, "0"+h.Get(wechatpay.HeaderTimestamp)), body},
		{"timestamp not a number", with(wechatpay.HeaderTimestamp, "soon"), body},
		{"body tampered by one byte", h, oneByte},
		{"body tampered in the ciphertext", h, tampered},
		{"body with a trailing newline", h, append(append([]byte{}, body...), '\n')},
		{"expired", expiredH, expiredBody},
		{"from the future", futureH, futureBody},
		{"resource sealed under another APIv3 key", s.Sign(otherBody, now), otherBody},
		{"ciphertext not base64", s.Sign(envelope(t, "TRANSACTION.SUCCESS", "!!", "123456789012"), now), envelope(t, "TRANSACTION.SUCCESS", "!!", "123456789012")},
		{"nonce of the wrong length", s.Sign(envelope(t, "TRANSACTION.SUCCESS", "AAAA", "short"), now), envelope(t, "TRANSACTION.SUCCESS", "AAAA", "short")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Verify(tc.header, tc.body)
			assert.ErrorIs(t, err, payment.ErrInvalidSignature)
		})
	}
}

// envelope is a callback body with the given resource ciphertext and nonce.
func envelope(t *testing.T, eventType, ciphertext, nonce string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id": "EV-1", "create_time": "2026-12-03T18:30:00+08:00", "event_type": eventType, "resource_type": "encrypt-resource",
		"resource": map[string]string{"algorithm": "AEAD_AES_256_GCM", "ciphertext": ciphertext, "nonce": nonce, "associated_data": "transaction", "original_type": "transaction"},
	})
	require.NoError(t, err)
	return b
}

func TestVerifyToleratesClockSkewUpToFiveMinutes(t *testing.T) {
	now := time.Now().Truncate(time.Second) // timestamps are whole seconds
	s, p := setup(t, now)
	for _, at := range []time.Time{now.Add(-wechatpay.Tolerance), now.Add(wechatpay.Tolerance)} {
		h, body := s.Notification("TRANSACTION.SUCCESS", transaction("ord-1", "4200000001", 9800, "SUCCESS"), at)
		_, err := p.Verify(h, body)
		assert.NoError(t, err, "signed at %s", at)
	}
}

func TestVerifyMalformedButAuthentic(t *testing.T) {
	now := time.Now()
	s, p := setup(t, now)
	bend := func(f func(m map[string]any)) map[string]any {
		m := transaction("ord-1", "4200000001", 9800, "SUCCESS")
		f(m)
		return m
	}
	resources := map[string]any{
		"other mchid":           bend(func(m map[string]any) { m["mchid"] = "1900000110" }),
		"other appid":           bend(func(m map[string]any) { m["appid"] = "wx0000000000000000" }),
		"no appid":              bend(func(m map[string]any) { delete(m, "appid") }),
		"fractional amount":     bend(func(m map[string]any) { m["amount"] = map[string]any{"total": 98.5, "currency": "CNY"} }),
		"amount as a string":    bend(func(m map[string]any) { m["amount"] = map[string]any{"total": "9800", "currency": "CNY"} }),
		"zero amount":           bend(func(m map[string]any) { m["amount"] = map[string]any{"total": 0, "currency": "CNY"} }),
		"no currency":           bend(func(m map[string]any) { m["amount"] = map[string]any{"total": 9800} }),
		"no transaction_id":     bend(func(m map[string]any) { delete(m, "transaction_id") }),
		"no out_trade_no":       bend(func(m map[string]any) { delete(m, "out_trade_no") }),
		"bad success_time":      bend(func(m map[string]any) { m["success_time"] = "2026-12-03 18:30:00" }),
		"resource not JSON":     []byte(`{"mchid":`),
		"resource a JSON array": []byte(`[]`),
	}
	for name, res := range resources {
		t.Run(name, func(t *testing.T) {
			h, body := s.Notification("TRANSACTION.SUCCESS", res, now)
			_, err := p.Verify(h, body)
			assert.ErrorIs(t, err, payment.ErrMalformedNotification)
		})
	}
	_, body := s.Notification("TRANSACTION.SUCCESS", transaction("ord-1", "4200000001", 9800, "SUCCESS"), now)
	bodies := map[string]string{
		"not JSON":        `{"event_type":`,
		"trailing data":   string(body) + `{}`,
		"no resource":     `{"id":"EV-1","event_type":"TRANSACTION.SUCCESS"}`,
		"other algorithm": strings.Replace(string(body), "AEAD_AES_256_GCM", "AEAD_SM4_GCM", 1),
	}
	for name, b := range bodies {
		t.Run(name, func(t *testing.T) {
			_, err := p.Verify(s.Sign([]byte(b), now), []byte(b))
			assert.ErrorIs(t, err, payment.ErrMalformedNotification)
		})
	}
}

func TestVerifyIgnoresOtherEvents(t *testing.T) {
	now := time.Now()
	s, p := setup(t, now)
	for _, ev := range []string{"TRANSACTION.CLOSED", "PROFITSHARING.SUCCESS", "REFUND.PROCESSING", "transaction.success", ""} {
		t.Run(ev, func(t *testing.T) {
			h, body := s.Notification(ev, map[string]string{"anything": "at all"}, now)
			_, err := p.Verify(h, body)
			assert.ErrorIs(t, err, payment.ErrIgnoredNotification)
		})
	}
}

func TestVerifyRefundNotifications(t *testing.T) {
	now := time.Now()
	s, p := setup(t, now)
	for status, want := range map[string]payment.RefundStatus{
		"SUCCESS": payment.RefundSucceeded, "ABNORMAL": payment.RefundFailed, "CLOSED": payment.RefundFailed,
	} {
		t.Run(status, func(t *testing.T) {
			h, body := s.RefundNotification("ord-1", "4200000001", "refund-1", status)
			n, err := p.Verify(h, body)
			require.NoError(t, err)
			require.NotNil(t, n.Refund)
			assert.Equal(t, "wechatpay", n.Provider)
			assert.Equal(t, "4200000001", n.ProviderTxnID)
			assert.Equal(t, "ord-1", n.OrderID)
			assert.Equal(t, "refund-1", n.Refund.RefundID)
			assert.NotEmpty(t, n.Refund.ProviderRefundID)
			assert.Equal(t, want, n.Refund.Status)
		})
	}

	refund := func(mchid, status string) map[string]any {
		return map[string]any{"mchid": mchid, "transaction_id": "4200000001", "out_trade_no": "ord-1",
			"refund_id": "50300001", "out_refund_no": "refund-1", "refund_status": status}
	}
	for name, tc := range map[string]struct {
		event string
		res   any
	}{
		"other mchid":                {"REFUND.SUCCESS", refund("1900000110", "SUCCESS")},
		"status not the event's":     {"REFUND.SUCCESS", refund(wechatpaytest.MchID, "ABNORMAL")},
		"no transaction_id":          {"REFUND.SUCCESS", map[string]any{"mchid": wechatpaytest.MchID, "out_refund_no": "refund-1", "refund_id": "5030", "refund_status": "SUCCESS"}},
		"no refund ids":              {"REFUND.CLOSED", map[string]any{"mchid": wechatpaytest.MchID, "transaction_id": "4200000001", "refund_status": "CLOSED"}},
		"resource not a JSON object": {"REFUND.SUCCESS", []byte(`"SUCCESS"`)},
	} {
		t.Run(name, func(t *testing.T) {
			h, body := s.Notification(tc.event, tc.res, now)
			_, err := p.Verify(h, body)
			assert.ErrorIs(t, err, payment.ErrMalformedNotification)
		})
	}
}

func TestReply(t *testing.T) {
	p := &wechatpay.Provider{}
	for _, status := range []int{http.StatusOK, http.StatusNoContent} {
		ct, body := p.Reply(status, nil)
		assert.Empty(t, ct)
		assert.Empty(t, body, "WeChat Pay wants no body on success")
	}
	ct, body := p.Reply(http.StatusUnauthorized, payment.ErrInvalidSignature)
	assert.Equal(t, "application/json", ct)
	assert.JSONEq(t, `{"code":"FAIL","message":"invalid signature"}`, string(body))

	_, body = p.Reply(http.StatusInternalServerError, assert.AnError)
	assert.JSONEq(t, `{"code":"FAIL","message":"Internal Server Error"}`, string(body), "no internal details")
}

func TestNewValidatesTheConfig(t *testing.T) {
	s := wechatpaytest.New(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pkix, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	pubPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix}))
	pkcs1PEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)}))
	pkcs1Private := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	smallPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}))

	bend := func(f func(*wechatpay.Config)) wechatpay.Config {
		c := s.Config()
		f(&c)
		return c
	}
	valid := map[string]wechatpay.Config{
		"the double's":         s.Config(),
		"PKIX public-key id":   bend(func(c *wechatpay.Config) { c.PlatformPublicKeys["PUB_KEY_ID_0114232134912410000"] = pubPEM }),
		"PKCS #1 public key":   bend(func(c *wechatpay.Config) { c.PlatformPublicKeys["PUB_KEY_ID_2"] = pkcs1PEM }),
		"PKCS #1 merchant key": bend(func(c *wechatpay.Config) { c.MerchantPrivateKeyPEM = pkcs1Private }),
		"serial in lower case": bend(func(c *wechatpay.Config) {
			c.PlatformPublicKeys = map[string]string{strings.ToLower(s.Serial()): s.Config().PlatformPublicKeys[s.Serial()]}
		}),
		"base URL with a slash":   bend(func(c *wechatpay.Config) { c.BaseURL += "/" }),
		"default base URL":        bend(func(c *wechatpay.Config) { c.BaseURL = "" }),
		"own HTTP client and now": bend(func(c *wechatpay.Config) { c.HTTPClient, c.Now = http.DefaultClient, time.Now }),
	}
	for name, c := range valid {
		t.Run(name, func(t *testing.T) {
			_, err := wechatpay.New(c)
			assert.NoError(t, err)
		})
	}
	invalid := map[string]struct {
		c    wechatpay.Config
		says string
	}{
		"no mchid":                  {bend(func(c *wechatpay.Config) { c.MchID = "" }), "MchID"},
		"no appid":                  {bend(func(c *wechatpay.Config) { c.AppID = "" }), "AppID"},
		"no merchant serial":        {bend(func(c *wechatpay.Config) { c.MerchantSerialNo = "" }), "MerchantSerialNo"},
		"APIv3 key of 31 bytes":     {bend(func(c *wechatpay.Config) { c.APIv3Key = c.APIv3Key[:31] }), "APIv3Key is 31 bytes"},
		"APIv3 key of 33 bytes":     {bend(func(c *wechatpay.Config) { c.APIv3Key += "x" }), "APIv3Key is 33 bytes"},
		"merchant key not PEM":      {bend(func(c *wechatpay.Config) { c.MerchantPrivateKeyPEM = "MIIEvQ…" }), "MerchantPrivateKeyPEM"},
		"merchant key a public key": {bend(func(c *wechatpay.Config) { c.MerchantPrivateKeyPEM = pubPEM }), "MerchantPrivateKeyPEM"},
		"merchant key of 1024 bits": {bend(func(c *wechatpay.Config) { c.MerchantPrivateKeyPEM = smallPEM }), "shorter than 2048"},
		"no platform keys":          {bend(func(c *wechatpay.Config) { c.PlatformPublicKeys = nil }), "PlatformPublicKeys is empty"},
		"platform key not PEM":      {bend(func(c *wechatpay.Config) { c.PlatformPublicKeys["PUB_KEY_ID_1"] = "nope" }), "PUB_KEY_ID_1"},
		"certificate under another serial": {bend(func(c *wechatpay.Config) {
			c.PlatformPublicKeys = map[string]string{"ABC": s.Config().PlatformPublicKeys[s.Serial()]}
		}), "not ABC"},
		"base URL not http": {bend(func(c *wechatpay.Config) { c.BaseURL = "api.mch.weixin.qq.com" }), "BaseURL"},
	}
	for name, tc := range invalid {
		t.Run(name, func(t *testing.T) {
			_, err := wechatpay.New(tc.c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// withUTC returns n with PaidAt in UTC, so that it compares with assert.Equal.
func withUTC(n payment.Notification) payment.Notification {
	n.PaidAt = n.PaidAt.UTC()
	return n
}
