package alipay_test

import (
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay/alipaytest"
)

// FuzzVerify feeds arbitrary bodies to the notification verifier, either as they are or, when
// sign is set and the body is a form, signed by the double's Alipay key. Properties: no
// panic; every error wraps ErrInvalidSignature, ErrMalformedNotification or
// ErrIgnoredNotification; nothing is accepted whose parameters Alipay did not sign (those of
// a seed it signed, or of the input it signed); what is accepted is a valid alipay
// notification.
func FuzzVerify(f *testing.F) {
	s := alipaytest.New(f)
	p, err := alipay.New(s.Config())
	if err != nil {
		f.Fatal(err)
	}
	signedContents := map[string]bool{}
	seed := func(_ http.Header, body []byte) {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			f.Fatal(err)
		}
		signedContents[content(v)] = true
		f.Add(body, false)
		f.Add(body, true)
	}
	seed(s.PaymentNotification("ord-1", "2026120322001400001", 9800, "TRADE_SUCCESS"))
	seed(s.PaymentNotification("ord-2", "2026120322001400002", 1, "TRADE_CLOSED"))
	seed(s.RefundNotification("ord-1", "2026120322001400001", "refund-1", 9800))
	seed(s.Notification(with(paid("ord-3", "2026120322001400003", "1e3"), "trans_currency", "usd")))
	for _, body := range []string{``, `sign=`, `a=1&a=2`, `%zz`, `sign_type=RSA2&sign=AAAA&total_amount=-1`, `;`, strings.Repeat("&", 1000)} {
		f.Add([]byte(body), false)
		f.Add([]byte(body), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, sign bool) {
		if sign {
			v, err := url.ParseQuery(string(body))
			if err != nil {
				return
			}
			_, body = s.Notification(v)
		}
		n, err := p.Verify(http.Header{}, body)
		if err != nil {
			if !errors.Is(err, payment.ErrInvalidSignature) && !errors.Is(err, payment.ErrMalformedNotification) && !errors.Is(err, payment.ErrIgnoredNotification) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		v, err := url.ParseQuery(string(body))
		if err != nil {
			t.Fatalf("accepted a body that is no form: %q", body)
		}
		if !sign && !signedContents[content(v)] {
			t.Fatalf("accepted %q, whose parameters Alipay never signed", body)
		}
		if n.Provider != alipay.Name {
			t.Fatalf("provider %q", n.Provider)
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("accepted an invalid notification %+v: %v", n, err)
		}
	})
}

// content is what the parameters of a notification say, sign and sign_type aside, empty
// values left out: two bodies with one content are the same notification.
func content(v url.Values) string {
	var pairs []string
	for k, vs := range v {
		for _, x := range vs {
			if k != "sign" && k != "sign_type" && x != "" {
				pairs = append(pairs, url.QueryEscape(k)+"="+url.QueryEscape(x))
			}
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}
