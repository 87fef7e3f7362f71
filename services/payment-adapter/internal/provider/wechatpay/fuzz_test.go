package wechatpay_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/wechatpay"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/wechatpay/wechatpaytest"
)

// FuzzVerify feeds arbitrary callback bodies to the verifier, either signed by the double's
// platform key (sign) or under an arbitrary signature. Properties: no panic; every error wraps
// ErrInvalidSignature, ErrMalformedNotification or ErrIgnoredNotification; nothing unsigned
// is accepted; what is accepted is a valid wechatpay notification. Signed bodies reach the
// JSON and the decryption; the seeds carry sealed resources so mutations reach the rest.
func FuzzVerify(f *testing.F) {
	now := time.Now()
	s := wechatpaytest.New(f)
	c := s.Config()
	c.Now = func() time.Time { return now }
	p, err := wechatpay.New(c)
	if err != nil {
		f.Fatal(err)
	}
	seed := func(h http.Header, body []byte) {
		f.Add(body, h.Get(wechatpay.HeaderSignature), true)
		f.Add(body, h.Get(wechatpay.HeaderSignature), false)
	}
	seed(s.PaymentNotification("ord-1", "4200000001", 9800, "CNY", "SUCCESS"))
	seed(s.PaymentNotification("ord-2", "4200000002", 1, "CNY", "PAYERROR"))
	seed(s.RefundNotification("ord-1", "4200000001", "refund-1", "SUCCESS"))
	seed(s.Notification("TRANSACTION.SUCCESS", []byte(`{"mchid":"1900000109","amount":{"total":1e400}}`), now))
	seed(s.Notification("MARKETING.X", map[string]int{"a": 1}, now))
	for _, body := range []string{``, `null`, `[]`, `{"event_type":"TRANSACTION.SUCCESS","resource":null}`, `{"event_type":"TRANSACTION.SUCCESS","resource":{"algorithm":"AEAD_AES_256_GCM","nonce":"","ciphertext":""}}`} {
		f.Add([]byte(body), "", true)
		f.Add([]byte(body), "c2lnbmF0dXJl", false)
	}
	f.Fuzz(func(t *testing.T, body []byte, sig string, sign bool) {
		h := s.Sign(body, now)
		genuine := h.Get(wechatpay.HeaderSignature)
		if !sign {
			h.Set(wechatpay.HeaderSignature, sig)
		}
		n, err := p.Verify(h, body)
		if err != nil {
			if !errors.Is(err, payment.ErrInvalidSignature) && !errors.Is(err, payment.ErrMalformedNotification) && !errors.Is(err, payment.ErrIgnoredNotification) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		if !sign && sig != genuine {
			t.Fatalf("accepted %q under signature %q, not the body's", body, sig)
		}
		if n.Provider != wechatpay.Name {
			t.Fatalf("provider %q", n.Provider)
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("accepted an invalid notification %+v: %v", n, err)
		}
	})
}
