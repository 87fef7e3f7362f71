package sandbox_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
)

// FuzzVerify feeds arbitrary bodies to the sandbox's callback verifier, either signed with the
// secret (sign) or with an arbitrary signature header. Properties: no panic; every error wraps
// ErrInvalidSignature or ErrMalformedNotification (401 and 400 in httpapi/errors.go); nothing
// is accepted without the body's own signature; what is accepted is a valid sandbox
// notification.
func FuzzVerify(f *testing.F) {
	for _, body := range []string{
		good,
		strings.Replace(good, `"succeeded"`, `"failed"`, 1),
		`{"provider_txn_id":"txn-1","order_id":"ord-1","amount":9800,"currency":"CNY"}`,
		good + " ",
		good + `{}`,
		`{"provider_txn_id":"txn-1","order_id":"ord-1","amount":9800,"currency":"CNY","status":"succeeded","extra":1}`,
		`{"provider_txn_id":"txn-1","order_id":"ord-1","amount":99999999999999999999,"currency":"CNY","status":"succeeded"}`,
		`{"provider_txn_id":"txn-1","order_id":"ord-1","amount":-1,"currency":"cny","status":"refunded"}`,
		`{"provider_txn_id":"a\u0000b","order_id":"a\u0000b","amount":1e400,"currency":"CNY","status":"succeeded"}`,
		"{\"provider_txn_id\":\"\xff\",\"order_id\":\"ord-1\",\"amount\":1,\"currency\":\"CNY\",\"status\":\"succeeded\"}",
		`{"provider_txn_id":1,"order_id":["ord-1"],"amount":"9800","currency":null,"status":true}`,
		`{"provider_txn_id":` + strings.Repeat(`[`, 10001),
		`null`,
		``,
	} {
		f.Add([]byte(body), "", true)
		f.Add([]byte(body), "zz-not-hex", false)
	}
	p, err := sandbox.New("fuzz-secret")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(good), p.Sign([]byte(good))[:32], false)
	f.Add([]byte(good), strings.ToUpper(p.Sign([]byte(good))), false)
	f.Fuzz(func(t *testing.T, body []byte, sig string, sign bool) {
		if sign {
			sig = p.Sign(body)
		}
		h := http.Header{}
		h.Set(sandbox.SignatureHeader, sig)
		n, err := p.Verify(h, body)
		if err != nil {
			if !errors.Is(err, payment.ErrInvalidSignature) && !errors.Is(err, payment.ErrMalformedNotification) {
				t.Fatalf("error is neither an invalid signature nor a malformed notification: %v", err)
			}
			return
		}
		if !strings.EqualFold(strings.TrimSpace(h.Get(sandbox.SignatureHeader)), p.Sign(body)) {
			t.Fatalf("accepted %q under signature %q, not the body's", body, sig)
		}
		if n.Provider != sandbox.Name {
			t.Fatalf("provider %q", n.Provider)
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("accepted an invalid notification %+v: %v", n, err)
		}
	})
}
