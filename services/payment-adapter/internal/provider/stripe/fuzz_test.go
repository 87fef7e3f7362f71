package stripe_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe"
)

// FuzzVerify feeds arbitrary bodies to the Stripe webhook verifier, either signed now with the
// endpoint secret (sign) or under an arbitrary Stripe-Signature header. Properties: no panic;
// every error wraps ErrInvalidSignature, ErrMalformedNotification or ErrIgnoredNotification
// (401, 400 and 2xx in httpapi/errors.go); nothing is accepted that does not carry the body's
// own signature; what is accepted is a valid stripe notification.
func FuzzVerify(f *testing.F) {
	srv, p := setup(f)
	secret := srv.Config().WebhookSecret
	pi := waiting(srv)
	_, failed := srv.Fail(pi, "card_declined", "Your card was declined.")
	h, succeeded := srv.Succeed(pi)
	_, refund := srv.Event("refund.updated", map[string]any{"id": "re_1", "object": "refund", "status": "pending", "payment_intent": pi, "metadata": map[string]any{"refund_id": "r-1"}})
	_, charge := srv.Event("charge.refunded", map[string]any{"id": "ch_1", "object": "charge", "payment_intent": pi,
		"refunds": map[string]any{"data": []any{map[string]any{"id": "re_1", "object": "refund", "status": "succeeded"}}}})
	_, ignored := srv.Event("customer.created", map[string]any{"id": "cus_1"})
	for _, body := range []string{
		string(succeeded), string(failed), string(refund), string(charge), string(ignored),
		strings.Replace(string(succeeded), `"amount":9800`, `"amount":-1`, 1),
		strings.Replace(string(succeeded), `"currency":"usd"`, `"currency":null`, 1),
		strings.Replace(string(succeeded), `"amount":9800`, `"amount":1e400`, 1),
		strings.Replace(string(succeeded), `"order_id":"ord-1"`, `"order_id":"\u0000"`, 1),
		`{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":"pi_1"}}`,
		`{"id":"evt_1","type":"refund.updated","data":{"object":{"object":"refund","id":"re_1","status":"succeeded","payment_intent":{"id":"pi_1"}}}}`,
		`{"id":"evt_1","type":"charge.refunded","data":{"object":{"object":"charge","id":"ch_1","payment_intent":"pi_1","refunds":{"data":[null]}}}}`,
		`{"data":` + strings.Repeat(`[`, 10001),
		`null`, ``,
	} {
		f.Add([]byte(body), "", true)
		f.Add([]byte(body), "t=1,v1=00", false)
	}
	f.Add(succeeded, h.Get(stripe.SignatureHeader), false)
	f.Add(succeeded, strings.ToUpper(h.Get(stripe.SignatureHeader)), false)
	f.Fuzz(func(t *testing.T, body []byte, sig string, sign bool) {
		header := http.Header{stripe.SignatureHeader: {sig}}
		if sign {
			header = srv.Sign(body, time.Now())
		}
		n, err := p.Verify(header, body)
		if err != nil {
			if !errors.Is(err, payment.ErrInvalidSignature) && !errors.Is(err, payment.ErrMalformedNotification) && !errors.Is(err, payment.ErrIgnoredNotification) {
				t.Fatalf("error is neither an invalid signature, a malformed nor an ignored notification: %v", err)
			}
			return
		}
		if err := webhook.ValidatePayload(body, header.Get(stripe.SignatureHeader), secret); err != nil {
			t.Fatalf("accepted %q under a signature that is not the body's: %v", body, err)
		}
		if n.Provider != stripe.Name {
			t.Fatalf("provider %q", n.Provider)
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("accepted an invalid notification %+v: %v", n, err)
		}
	})
}
