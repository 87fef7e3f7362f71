package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay/alipaytest"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe/stripetest"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/wechatpay/wechatpaytest"
)

// doubles is the TB the three doubles run under outside go test: Fatalf panics with a
// refusal the control handler turns into a 400, Cleanup's funcs run at Close.
type doubles struct {
	mu       sync.Mutex
	cleanups []func()
}

// refusal is what a double refused (an unknown refund, a bad status).
type refusal string

func (*doubles) Helper()                           {}
func (*doubles) Fatalf(format string, args ...any) { panic(refusal(fmt.Sprintf(format, args...))) }
func (d *doubles) Cleanup(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cleanups = append(d.cleanups, f)
}

// Sim is the three providers and the control API.
type Sim struct {
	callbacks string // payment-adapter base URL
	client    *http.Client
	tb        *doubles
	stripe    *stripetest.Server
	wechat    *wechatpaytest.Server
	alipay    *alipaytest.Server
}

func newSim(callbacks string) (s *Sim, err error) {
	if u, err := url.Parse(callbacks); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-callbacks %q is not an http(s) URL", callbacks)
	}
	s = &Sim{callbacks: strings.TrimSuffix(callbacks, "/"), client: &http.Client{Timeout: 30 * time.Second},
		tb: &doubles{}}
	defer func() {
		if r := recover(); r != nil {
			s.Close()
			s, err = nil, fmt.Errorf("start the provider doubles: %v", r)
		}
	}()
	s.stripe, s.wechat, s.alipay = stripetest.New(s.tb), wechatpaytest.New(s.tb), alipaytest.New(s.tb)
	return s, nil
}

// Close stops the doubles' servers.
func (s *Sim) Close() {
	s.tb.mu.Lock()
	defer s.tb.mu.Unlock()
	for _, f := range slices.Backward(s.tb.cleanups) {
		f()
	}
	s.tb.cleanups = nil
}

// Env is the adapter's environment for the three providers, PEM texts on one line.
func (s *Sim) Env() []string {
	sc, wc, ac := s.stripe.Config(), s.wechat.Config(), s.alipay.Config()
	oneLine := func(pem string) string { return strings.ReplaceAll(strings.TrimSpace(pem), "\n", `\n`) }
	env := []string{
		"PAYMENT_STRIPE_API_KEY=" + sc.APIKey, "PAYMENT_STRIPE_WEBHOOK_SECRET=" + sc.WebhookSecret,
		"PAYMENT_STRIPE_API_URL=" + sc.APIURL,
		"PAYMENT_WECHATPAY_MCH_ID=" + wc.MchID, "PAYMENT_WECHATPAY_APP_ID=" + wc.AppID,
		"PAYMENT_WECHATPAY_MERCHANT_SERIAL_NO=" + wc.MerchantSerialNo,
		"PAYMENT_WECHATPAY_MERCHANT_PRIVATE_KEY=" + oneLine(wc.MerchantPrivateKeyPEM),
		"PAYMENT_WECHATPAY_APIV3_KEY=" + wc.APIv3Key, "PAYMENT_WECHATPAY_BASE_URL=" + wc.BaseURL,
	}
	for id, key := range wc.PlatformPublicKeys { // one
		env = append(env, "PAYMENT_WECHATPAY_PLATFORM_PUBLIC_KEY_ID="+id, "PAYMENT_WECHATPAY_PLATFORM_PUBLIC_KEY="+oneLine(key))
	}
	return append(env,
		"PAYMENT_ALIPAY_APP_ID="+ac.AppID, "PAYMENT_ALIPAY_APP_PRIVATE_KEY="+oneLine(ac.AppPrivateKeyPEM),
		"PAYMENT_ALIPAY_PUBLIC_KEY="+oneLine(ac.AlipayPublicKeyPEM), "PAYMENT_ALIPAY_GATEWAY_URL="+ac.GatewayURL,
		"PAYMENT_ALIPAY_SELLER_ID="+ac.SellerID)
}

// Callback is a callback as the provider sends it.
type Callback struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// Delivered is the adapter's answer to a callback.
type Delivered struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

// PaymentRequest asks for a payment.
type PaymentRequest struct {
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`   // minor units
	Currency string `json:"currency"` // ISO 4217; Alipay takes CNY only
	Outcome  string `json:"outcome"`  // succeeded (default) or failed
	Deliver  *bool  `json:"deliver"`  // POST the callback to the adapter; default true
}

// PaymentResult is a payment made.
type PaymentResult struct {
	ProviderTxnID string     `json:"provider_txn_id"`
	Callback      *Callback  `json:"callback,omitempty"` // nil: the provider sends none (a failed WeChat Pay payment)
	Delivered     *Delivered `json:"delivered,omitempty"`
}

// RefundView is a refund a provider holds.
type RefundView struct {
	ProviderRefundID string `json:"provider_refund_id"` // what a complete call names
	RefundID         string `json:"refund_id"`          // the adapter's (idempotency key, out_refund_no, out_request_no)
	OrderID          string `json:"order_id"`
	ProviderTxnID    string `json:"provider_txn_id"`
	Amount           int64  `json:"amount"`
	Status           string `json:"status"` // the provider's own word
}

// apiError is the control API's error: a status and a message.
type apiError struct {
	status int
	msg    string
}

func (e apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// Handler is the control API.
func (s *Sim) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("POST /{provider}/payments", s.handle(s.pay))
	mux.HandleFunc("POST /{provider}/sign", s.handle(s.sign))
	mux.HandleFunc("GET /{provider}/refunds", s.handle(s.refunds))
	mux.HandleFunc("POST /{provider}/refund-status", s.handle(s.refundStatus))
	mux.HandleFunc("POST /{provider}/refunds/{id}/complete", s.handle(s.completeRefund))
	return mux
}

// handle runs one control call: a known provider, a JSON answer, a double's refusal as 400.
func (s *Sim) handle(fn func(provider string, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		provider := r.PathValue("provider")
		switch provider {
		case "stripe", "wechatpay", "alipay":
		default:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no provider " + provider + " (stripe, wechatpay, alipay)"})
			return
		}
		out, err := func() (out any, err error) {
			defer func() {
				if r := recover(); r != nil {
					msg, ok := r.(refusal)
					if !ok {
						panic(r)
					}
					err = badRequest("%s", msg)
				}
			}()
			return fn(provider, r)
		}()
		var ae apiError
		switch {
		case errors.As(err, &ae):
			writeJSON(w, ae.status, map[string]string{"error": ae.msg})
		case err != nil:
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, out)
		}
	}
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("body: %v", err)
	}
	return nil
}

// pay is POST /{provider}/payments.
func (s *Sim) pay(provider string, r *http.Request) (any, error) {
	var req PaymentRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Outcome == "" {
		req.Outcome = "succeeded"
	}
	switch {
	case req.OrderID == "":
		return nil, badRequest("order_id is required")
	case req.Amount <= 0:
		return nil, badRequest("amount must be positive minor units")
	case len(req.Currency) != 3:
		return nil, badRequest("currency must be an ISO 4217 code")
	case req.Outcome != "succeeded" && req.Outcome != "failed":
		return nil, badRequest("outcome must be succeeded or failed")
	case provider == "alipay" && !strings.EqualFold(req.Currency, "CNY"):
		return nil, badRequest("alipay takes CNY only")
	}
	succeeded := req.Outcome == "succeeded"
	var (
		txn string
		h   http.Header
		b   []byte
	)
	switch provider {
	case "stripe":
		txn = s.stripe.AddPaymentIntent(stripetest.PaymentIntent{OrderID: req.OrderID, Amount: req.Amount, Currency: req.Currency, Status: "requires_confirmation"})
		if succeeded {
			h, b = s.stripe.Succeed(txn)
		} else {
			h, b = s.stripe.Fail(txn, "card_declined", "Your card was declined.")
		}
	case "wechatpay":
		txn = tradeNo("4200")
		if succeeded {
			h, b = s.wechat.PaymentNotification(req.OrderID, txn, req.Amount, strings.ToUpper(req.Currency), "SUCCESS")
		} else {
			// WeChat Pay notifies successes only; a failed payment is known by query.
			s.wechat.AddTransaction(req.OrderID, "", req.Amount, strings.ToUpper(req.Currency), "PAYERROR")
			txn = ""
		}
	case "alipay":
		txn = tradeNo("2026")
		status := "TRADE_SUCCESS"
		if !succeeded {
			status = "TRADE_CLOSED"
		}
		h, b = s.alipay.PaymentNotification(req.OrderID, txn, req.Amount, status)
	}
	res := PaymentResult{ProviderTxnID: txn}
	if b == nil {
		return res, nil
	}
	res.Callback = s.callback(provider, h, b)
	return s.deliverUnless(r, res, req.Deliver)
}

// deliverUnless delivers res's callback unless deliver says false, and adds the answer.
func (s *Sim) deliverUnless(r *http.Request, res PaymentResult, deliver *bool) (PaymentResult, error) {
	if deliver != nil && !*deliver {
		return res, nil
	}
	d, err := s.deliver(r, res.Callback)
	if err != nil {
		return PaymentResult{}, err
	}
	res.Delivered = d
	return res, nil
}

// tradeNo is a provider transaction number: prefix and 24 random digits.
func tradeNo(prefix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, c := range rand.Text()[:24] {
		b.WriteByte('0' + byte(c)%10)
	}
	return b.String()
}

func (s *Sim) callback(provider string, h http.Header, body []byte) *Callback {
	headers := map[string]string{}
	for k := range h {
		headers[k] = h.Get(k)
	}
	return &Callback{URL: s.callbacks + "/v1/callbacks/" + provider, Headers: headers, Body: string(body)}
}

// deliver POSTs a callback to the adapter, as the provider would.
func (s *Sim) deliver(r *http.Request, cb *Callback) (*Delivered, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, cb.URL, strings.NewReader(cb.Body))
	if err != nil {
		return nil, err
	}
	for k, v := range cb.Headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("deliver the callback to %s: %w", cb.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("deliver the callback to %s: %w", cb.URL, err)
	}
	return &Delivered{Status: resp.StatusCode, Body: string(body)}, nil
}

// sign is POST /{provider}/sign: a callback body signed at another time (an expired one).
// Alipay's signature is in the body, over its notify_time: that is what is set and signed.
func (s *Sim) sign(provider string, r *http.Request) (any, error) {
	var req struct {
		Body string    `json:"body"`
		At   time.Time `json:"at"`
	}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Body == "" || req.At.IsZero() {
		return nil, badRequest("body and at are required")
	}
	switch provider {
	case "stripe":
		return s.callback(provider, s.stripe.Sign([]byte(req.Body), req.At), []byte(req.Body)), nil
	case "wechatpay":
		return s.callback(provider, s.wechat.Sign([]byte(req.Body), req.At), []byte(req.Body)), nil
	}
	f, err := url.ParseQuery(req.Body)
	if err != nil {
		return nil, badRequest("alipay body is not a form: %v", err)
	}
	f.Set("notify_time", req.At.In(time.FixedZone("CST", 8*60*60)).Format(alipay.TimeLayout))
	h, b := s.alipay.Notification(f)
	return s.callback(provider, h, b), nil
}

// refunds is GET /{provider}/refunds.
func (s *Sim) refunds(provider string, _ *http.Request) (any, error) {
	out := []RefundView{}
	switch provider {
	case "stripe":
		for _, re := range s.stripe.Refunds() {
			meta, _ := s.stripe.PaymentIntentObject(re.PaymentIntent)["metadata"].(map[string]string)
			out = append(out, RefundView{ProviderRefundID: re.ID, RefundID: re.IdempotencyKey, OrderID: meta[stripe.MetaOrderID],
				ProviderTxnID: re.PaymentIntent, Amount: re.Amount, Status: re.Status})
		}
	case "wechatpay":
		for _, re := range s.wechat.RefundList() {
			out = append(out, RefundView{ProviderRefundID: re.OutRefundNo, RefundID: re.OutRefundNo, OrderID: re.OutTradeNo,
				ProviderTxnID: re.TransactionID, Amount: re.Amount, Status: re.Status})
		}
	case "alipay":
		for _, re := range s.alipay.RefundList() {
			out = append(out, RefundView{ProviderRefundID: re.OutRequestNo, RefundID: re.OutRequestNo, OrderID: re.OutTradeNo,
				ProviderTxnID: re.TradeNo, Amount: re.Amount, Status: "REFUND_SUCCESS"})
		}
	}
	return out, nil
}

// refundStatus is POST /{provider}/refund-status: pending makes new refunds wait for a
// complete call (Stripe's pending, WeChat Pay's PROCESSING); Alipay refunds at once.
func (s *Sim) refundStatus(provider string, r *http.Request) (any, error) {
	var req struct {
		Status string `json:"status"`
	}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Status != "pending" && req.Status != "succeeded" {
		return nil, badRequest("status must be pending or succeeded")
	}
	switch provider {
	case "stripe":
		s.stripe.SetRefundStatus(req.Status)
	case "wechatpay":
		s.wechat.SetRefundStatus(map[string]string{"pending": "PROCESSING", "succeeded": "SUCCESS"}[req.Status])
	case "alipay":
		if req.Status == "pending" {
			return nil, badRequest("alipay refunds at once (fund_change Y): it has no pending refunds")
		}
	}
	return req, nil
}

// completeRefund is POST /{provider}/refunds/{id}/complete: the money is back (or, on
// Stripe, the refund failed), and the provider says so by its notification.
func (s *Sim) completeRefund(provider string, r *http.Request) (any, error) {
	var req struct {
		Status  string `json:"status"` // succeeded (default) or failed (Stripe)
		Deliver *bool  `json:"deliver"`
	}
	if r.ContentLength != 0 { // a body is optional
		if err := decode(r, &req); err != nil {
			return nil, err
		}
	}
	if req.Status == "" {
		req.Status = "succeeded"
	}
	id := r.PathValue("id")
	var (
		h http.Header
		b []byte
	)
	switch provider {
	case "stripe":
		if req.Status != "succeeded" && req.Status != "failed" {
			return nil, badRequest("status must be succeeded or failed")
		}
		h, b = s.stripe.CompleteRefund(id, req.Status)
	case "wechatpay":
		if req.Status != "succeeded" {
			return nil, badRequest("a WeChat Pay refund completes as succeeded")
		}
		h, b = s.wechat.CompleteRefund(id)
	case "alipay":
		return nil, badRequest("alipay refunds at once: there is nothing to complete")
	}
	return s.deliverUnless(r, PaymentResult{Callback: s.callback(provider, h, b)}, req.Deliver)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v) // maps, strings and numbers: it always encodes
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b) // the caller went away: nothing to do
}
