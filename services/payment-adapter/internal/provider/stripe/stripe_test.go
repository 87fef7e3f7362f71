package stripe_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe/stripetest"
)

// setup returns a double and a provider speaking to it.
func setup(t testing.TB) (*stripetest.Server, *stripe.Provider) {
	t.Helper()
	srv := stripetest.New(t)
	p, err := stripe.New(srv.Config())
	require.NoError(t, err)
	return srv, p
}

// waiting adds an intent of order ord-1 for 98.00 USD the buyer has not paid yet.
func waiting(srv *stripetest.Server) string {
	return srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "ord-1", Amount: 9800, Currency: "usd", Status: "requires_payment_method"})
}

// mutate returns a copy of obj changed by fn.
func mutate(obj map[string]any, fn func(map[string]any)) map[string]any {
	var cp map[string]any
	b, _ := json.Marshal(obj)
	_ = json.Unmarshal(b, &cp)
	fn(cp)
	return cp
}

func createdOf(t *testing.T, body []byte) time.Time {
	t.Helper()
	var ev struct{ Created int64 }
	require.NoError(t, json.Unmarshal(body, &ev))
	return time.Unix(ev.Created, 0).UTC()
}

func TestNewValidatesTheConfig(t *testing.T) {
	good := stripe.Config{APIKey: "sk_test_1", WebhookSecret: "whsec_1"}
	_, err := stripe.New(good)
	require.NoError(t, err)
	tests := []struct {
		name string
		edit func(*stripe.Config)
	}{
		{"no api key", func(c *stripe.Config) { c.APIKey = "" }},
		{"publishable key", func(c *stripe.Config) { c.APIKey = "pk_test_1" }},
		{"no webhook secret", func(c *stripe.Config) { c.WebhookSecret = "" }},
		{"bare whsec_ prefix", func(c *stripe.Config) { c.WebhookSecret = "whsec_" }},
		{"relative api url", func(c *stripe.Config) { c.APIURL = "api.stripe.com" }},
		{"ftp api url", func(c *stripe.Config) { c.APIURL = "ftp://api.stripe.com" }},
		{"negative tolerance", func(c *stripe.Config) { c.Tolerance = -time.Second }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			_, err := stripe.New(c)
			assert.Error(t, err)
		})
	}
}

func TestVerifyAcceptsPaymentEvents(t *testing.T) {
	srv, p := setup(t)
	tests := []struct {
		name  string
		event func(t *testing.T) (http.Header, []byte)
		want  func(body []byte) payment.Notification
	}{
		{
			"succeeded, paid when the event was created",
			func(*testing.T) (http.Header, []byte) { return srv.Succeed(waiting(srv)) },
			func(body []byte) payment.Notification {
				return payment.Notification{Amount: 9800, Currency: "USD", Outcome: payment.OutcomeSucceeded, PaidAt: createdOf(t, body)}
			},
		},
		{
			"succeeded: amount_received is what was paid, the expanded charge says when",
			func(*testing.T) (http.Header, []byte) {
				id := waiting(srv)
				srv.Succeed(id)
				return srv.Event("payment_intent.succeeded", mutate(srv.PaymentIntentObject(id), func(o map[string]any) {
					o["amount_received"] = 9000
					o["latest_charge"] = map[string]any{"id": "ch_1", "object": "charge", "created": 1700000000}
				}))
			},
			func([]byte) payment.Notification {
				return payment.Notification{Amount: 9000, Currency: "USD", Outcome: payment.OutcomeSucceeded, PaidAt: time.Unix(1700000000, 0).UTC()}
			},
		},
		{
			"failed, with the provider's reason",
			func(*testing.T) (http.Header, []byte) {
				return srv.Fail(waiting(srv), "card_declined", "Your card was declined.")
			},
			func([]byte) payment.Notification {
				return payment.Notification{Amount: 9800, Currency: "USD", Outcome: payment.OutcomeFailed, Reason: "card_declined: Your card was declined."}
			},
		},
		{
			"an event of another API version",
			func(t *testing.T) (http.Header, []byte) {
				_, body := srv.Succeed(waiting(srv))
				var ev map[string]any
				require.NoError(t, json.Unmarshal(body, &ev))
				ev["api_version"] = "2020-08-27"
				body, err := json.Marshal(ev)
				require.NoError(t, err)
				return srv.Sign(body, time.Now()), body
			},
			func(body []byte) payment.Notification {
				return payment.Notification{Amount: 9800, Currency: "USD", Outcome: payment.OutcomeSucceeded, PaidAt: createdOf(t, body)}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, body := tc.event(t)
			var ev struct {
				Data struct{ Object struct{ ID string } }
			}
			require.NoError(t, json.Unmarshal(body, &ev))
			want := tc.want(body)
			want.Provider, want.ProviderTxnID, want.OrderID = stripe.Name, ev.Data.Object.ID, "ord-1"
			n, err := p.Verify(h, body)
			require.NoError(t, err)
			assert.Equal(t, want, n)
		})
	}
}

func TestVerifyAcceptsRefundEvents(t *testing.T) {
	srv, p := setup(t)
	pi := srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "ord-1", Amount: 9800, Currency: "usd"})
	srv.SetRefundStatus("pending")
	res, err := p.Refund(t.Context(), payment.RefundRequest{RefundID: "refund-1", PaymentID: "pay-1", OrderID: "ord-1", ProviderTxnID: pi, Amount: 9800})
	require.NoError(t, err)
	re := res.ProviderRefundID
	pending := srv.RefundObject(re)
	notice := func(status payment.RefundStatus) payment.Notification {
		return payment.Notification{Provider: stripe.Name, ProviderTxnID: pi, OrderID: "ord-1",
			Refund: &payment.RefundNotice{RefundID: "refund-1", ProviderRefundID: re, Status: status}}
	}
	charge := map[string]any{"id": "ch_1", "object": "charge", "payment_intent": pi, "metadata": map[string]any{"order_id": "ord-1"}}
	tests := []struct {
		name  string
		event func() (http.Header, []byte)
		want  payment.Notification
	}{
		{"refund.created, pending", func() (http.Header, []byte) { return srv.Event("refund.created", pending) }, notice(payment.RefundPending)},
		{"requires_action is pending", func() (http.Header, []byte) {
			return srv.Event("refund.updated", mutate(pending, func(o map[string]any) { o["status"] = "requires_action" }))
		}, notice(payment.RefundPending)},
		{"refund.updated, succeeded", func() (http.Header, []byte) { return srv.CompleteRefund(re, "succeeded") }, notice(payment.RefundSucceeded)},
		{"refund.failed", func() (http.Header, []byte) { return srv.CompleteRefund(re, "failed") }, notice(payment.RefundFailed)},
		{"canceled is failed", func() (http.Header, []byte) { return srv.CompleteRefund(re, "canceled") }, notice(payment.RefundFailed)},
		{"a refund made in the dashboard: ours is not named", func() (http.Header, []byte) {
			return srv.Event("refund.updated", mutate(pending, func(o map[string]any) { o["metadata"] = map[string]any{} }))
		}, payment.Notification{Provider: stripe.Name, ProviderTxnID: pi,
			Refund: &payment.RefundNotice{ProviderRefundID: re, Status: payment.RefundPending}}},
		{"charge.refunded with its refunds list: ours, not the newest", func() (http.Header, []byte) {
			return srv.Event("charge.refunded", mutate(charge, func(o map[string]any) {
				other := mutate(pending, func(o map[string]any) { o["id"], o["metadata"] = "re_other", nil })
				o["refunds"] = map[string]any{"object": "list", "data": []any{other, pending}}
			}))
		}, notice(payment.RefundPending)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, body := tc.event()
			n, err := p.Verify(h, body)
			require.NoError(t, err)
			assert.Equal(t, tc.want, n)
		})
	}
}

func TestVerifySignatureFailures(t *testing.T) {
	srv, p := setup(t)
	h, body := srv.Succeed(waiting(srv))
	sign := func(secret string, at time.Time, body []byte) http.Header {
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
		return http.Header{stripe.SignatureHeader: {sp.Header}}
	}
	tests := []struct {
		name   string
		header http.Header
		body   []byte
	}{
		{"missing header", http.Header{}, body},
		{"another secret", sign("whsec_other", time.Now(), body), body},
		{"body changed after signing", h, []byte(strings.Replace(string(body), "9800", "9801", 1))},
		{"whitespace added after signing", h, append(append([]byte{}, body...), ' ')},
		{"older than 300 s", srv.Sign(body, time.Now().Add(-301*time.Second)), body},
		{"more than 300 s in the future", srv.Sign(body, time.Now().Add(301*time.Second)), body},
		{"no v1 signature", http.Header{stripe.SignatureHeader: {strings.Replace(h.Get(stripe.SignatureHeader), "v1=", "v0=", 1)}}, body},
		{"not a timestamp", http.Header{stripe.SignatureHeader: {"t=soon,v1=00"}}, body},
		{"not pairs", http.Header{stripe.SignatureHeader: {"garbage"}}, body},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Verify(tc.header, tc.body)
			assert.ErrorIs(t, err, payment.ErrInvalidSignature)
		})
	}
}

func TestVerifyToleranceIsConfigurable(t *testing.T) {
	srv := stripetest.New(t)
	c := srv.Config()
	c.Tolerance = 10 * time.Second
	p, err := stripe.New(c)
	require.NoError(t, err)
	_, body := srv.Event("customer.created", map[string]any{"id": "cus_1"})
	_, err = p.Verify(srv.Sign(body, time.Now().Add(-11*time.Second)), body)
	assert.ErrorIs(t, err, payment.ErrInvalidSignature)
	_, err = p.Verify(srv.Sign(body, time.Now().Add(-5*time.Second)), body)
	assert.ErrorIs(t, err, payment.ErrIgnoredNotification)
}

func TestVerifyMalformedButSigned(t *testing.T) {
	srv, p := setup(t)
	id := waiting(srv)
	srv.Succeed(id)
	pi := srv.PaymentIntentObject(id)
	refund := map[string]any{"id": "re_1", "object": "refund", "status": "succeeded", "payment_intent": id, "metadata": map[string]any{"refund_id": "refund-1"}}
	event := func(eventType string, obj map[string]any, fn func(map[string]any)) func() (http.Header, []byte) {
		return func() (http.Header, []byte) { return srv.Event(eventType, mutate(obj, fn)) }
	}
	raw := func(body string) func() (http.Header, []byte) {
		return func() (http.Header, []byte) { return srv.Sign([]byte(body), time.Now()), []byte(body) }
	}
	const succeeded = "payment_intent.succeeded"
	tests := []struct {
		name  string
		event func() (http.Header, []byte)
	}{
		{"missing metadata.order_id", event(succeeded, pi, func(o map[string]any) { o["metadata"] = map[string]any{} })},
		{"no metadata at all", event(succeeded, pi, func(o map[string]any) { delete(o, "metadata") })},
		{"order id with a quote", event(succeeded, pi, func(o map[string]any) { o["metadata"] = map[string]any{"order_id": "o'1"} })},
		{"bad currency", event(succeeded, pi, func(o map[string]any) { o["currency"] = "usdx" })},
		{"no currency", event(succeeded, pi, func(o map[string]any) { delete(o, "currency") })},
		{"zero amount", event(succeeded, pi, func(o map[string]any) { o["amount"], o["amount_received"] = 0, 0 })},
		{"no amount", event(succeeded, pi, func(o map[string]any) { delete(o, "amount"); delete(o, "amount_received") })},
		{"amount as a string", event(succeeded, pi, func(o map[string]any) { o["amount"] = "9800" })},
		{"succeeded event of an intent that is not", event(succeeded, pi, func(o map[string]any) { o["status"] = "processing" })},
		{"failed event of a succeeded intent", event("payment_intent.payment_failed", pi, func(map[string]any) {})},
		{"not a payment intent", event(succeeded, pi, func(o map[string]any) { o["object"] = "charge" })},
		{"no intent id", event(succeeded, pi, func(o map[string]any) { delete(o, "id") })},
		{"object is only an id", func() (http.Header, []byte) { return srv.Event(succeeded, id) }},
		{"refund without payment_intent", event("refund.updated", refund, func(o map[string]any) { delete(o, "payment_intent") })},
		{"refund of an unknown status", event("refund.updated", refund, func(o map[string]any) { o["status"] = "reversed" })},
		{"refund without id", event("refund.created", refund, func(o map[string]any) { delete(o, "id") })},
		{"charge.refunded without payment_intent", event("charge.refunded", map[string]any{"id": "ch_1", "object": "charge"}, func(map[string]any) {})},
		{"not JSON", raw(`{"id":"evt_1",`)},
		{"event without id", raw(`{"object":"event","type":"payment_intent.succeeded","data":{"object":{}}}`)},
		{"event without data", raw(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}`)},
		{"null", raw(`null`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, body := tc.event()
			_, err := p.Verify(h, body)
			assert.ErrorIs(t, err, payment.ErrMalformedNotification)
		})
	}
}

func TestVerifyIgnoresOtherEvents(t *testing.T) {
	srv, p := setup(t)
	tests := []struct {
		name      string
		eventType string
		object    any
	}{
		{"payment_intent.created", "payment_intent.created", srv.PaymentIntentObject(waiting(srv))},
		{"payment_intent.canceled", "payment_intent.canceled", srv.PaymentIntentObject(waiting(srv))},
		{"customer.created", "customer.created", map[string]any{"id": "cus_1", "object": "customer"}},
		{"charge.refunded without its refunds list (API 2022-11-15 and later)", "charge.refunded",
			map[string]any{"id": "ch_1", "object": "charge", "payment_intent": "pi_1", "refunded": true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, body := srv.Event(tc.eventType, tc.object)
			_, err := p.Verify(h, body)
			assert.ErrorIs(t, err, payment.ErrIgnoredNotification)
		})
	}
}
