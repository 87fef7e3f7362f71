// Package stripetest is a test double of the part of Stripe's API the stripe provider uses: a
// real HTTP server (httptest) speaking Stripe's REST protocol as stripe-go sends it, so the
// provider runs unchanged against it, and a signer of webhook events in Stripe's scheme.
//
// The API it serves, checked the way Stripe checks it:
//   - every request needs "Authorization: Bearer <the key of Config>", else 401;
//   - POST /v1/refunds (form-encoded: payment_intent, amount, reason, metadata[…]; any other
//     parameter is 400 parameter_unknown): 404 resource_missing for an unknown intent, 400 for an
//     intent that did not succeed, charge_already_refunded once refunds that are not failed or
//     canceled cover it, amount_too_large beyond what is left. An Idempotency-Key seen before
//     replays the first answer byte for byte (Idempotent-Replayed: true) — even after the refund
//     moved on, as Stripe does — and the same key with other parameters is 400
//     idempotency_error. Only successful answers are kept for replay.
//   - GET /v1/refunds?payment_intent=… : that intent's refunds, newest first (limit,
//     starting_after); 404 for an unknown intent.
//   - GET /v1/payment_intents/search?query=metadata['key']:'value' (the only query form it
//     understands; limit, page, expand[]=data.latest_charge).
//
// Errors are Stripe's {"error":{"type","code","message","param"}}. FailNext queues an error for
// the next request to a path (rate limits, api_error, …).
//
// A typical test:
//
//	srv := stripetest.New(t)
//	p, err := stripe.New(srv.Config())
//	pi := srv.AddPaymentIntent(stripetest.PaymentIntent{OrderID: "ord-1", Amount: 9800, Currency: "usd"})
//	h, body := srv.Succeed(pi) // a signed payment_intent.succeeded, for Verify or POST /v1/callbacks/stripe
//	srv.SetRefundStatus("pending")
//	res, err := p.Refund(ctx, req)             // pending
//	h, body = srv.CompleteRefund(res.ProviderRefundID, "succeeded") // a signed refund.updated
package stripetest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe"
)

// PaymentIntent is an intent to put in the double with AddPaymentIntent.
type PaymentIntent struct {
	ID       string            // "" is a new pi_… id
	OrderID  string            // metadata order_id; "" leaves it out
	Amount   int64             // minor units
	Currency string            // ISO 4217 in either case; Stripe's objects carry it lower-case
	Status   string            // Stripe's status; "" is succeeded
	Metadata map[string]string // more metadata
	Created  time.Time         // zero is now
	PaidAt   time.Time         // when a succeeded intent's charge was made; zero is Created
}

// Refund is a refund the double holds.
type Refund struct {
	ID             string
	PaymentIntent  string
	Charge         string
	Amount         int64
	Currency       string
	Status         string // succeeded, pending, requires_action, failed, canceled
	FailureReason  string
	Reason         string // Stripe's reason enum, as requested
	Metadata       map[string]string
	IdempotencyKey string
	Created        time.Time
}

type intent struct {
	PaymentIntent
	received  int64
	charge    string // latest charge id, "" before a payment
	chargedAt time.Time
	lastErr   map[string]any
}

type replay struct {
	params string
	body   []byte
}

type apiError struct {
	status          int
	typ, code, text string
}

// TB is the part of testing.TB the double uses, so it also runs outside go test (paysim, the
// provider simulator, passes its own): Fatalf must not return normally — testing's ends the
// goroutine, paysim's panics — and Cleanup's funcs run when the double is done with.
// *testing.T, *testing.B and *testing.F satisfy it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Server is the double. Its methods are safe for concurrent use with the requests it serves.
type Server struct {
	t      TB
	srv    *httptest.Server
	apiKey string
	secret string

	mu         sync.Mutex
	intents    map[string]*intent
	intentIDs  []string // in creation order
	refunds    []*Refund
	idem       map[string]replay
	nextStatus string
	calls      map[string]int
	fail       map[string][]apiError
}

// New starts a double, closed when t's cleanups run (a test's end).
func New(t TB) *Server {
	t.Helper()
	s := &Server{
		t: t, apiKey: "sk_test_" + rand.Text(), secret: "whsec_" + rand.Text(),
		intents: map[string]*intent{}, idem: map[string]replay{}, nextStatus: "succeeded",
		calls: map[string]int{}, fail: map[string][]apiError{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the double's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Config is a stripe provider configuration for the double: its API key, its random webhook
// secret and its URL.
func (s *Server) Config() stripe.Config {
	return stripe.Config{APIKey: s.apiKey, WebhookSecret: s.secret, APIURL: s.srv.URL, HTTPClient: s.srv.Client()}
}

// AddPaymentIntent puts pi in the double and returns its id. A succeeded intent has received
// its amount and has a charge.
func (s *Server) AddPaymentIntent(pi PaymentIntent) string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if pi.ID == "" {
		pi.ID = newID("pi")
	}
	if _, dup := s.intents[pi.ID]; dup {
		s.t.Fatalf("stripetest: payment intent %s added twice", pi.ID)
	}
	if pi.Status == "" {
		pi.Status = "succeeded"
	}
	if pi.Created.IsZero() {
		pi.Created = time.Now()
	}
	pi.Currency = strings.ToLower(pi.Currency)
	pi.Metadata = maps.Clone(pi.Metadata)
	if pi.Metadata == nil {
		pi.Metadata = map[string]string{}
	}
	if pi.OrderID != "" {
		pi.Metadata[stripe.MetaOrderID] = pi.OrderID
	}
	in := &intent{PaymentIntent: pi}
	if pi.PaidAt.IsZero() {
		pi.PaidAt = pi.Created
	}
	if pi.Status == "succeeded" {
		in.pay(pi.PaidAt)
	}
	s.intents[pi.ID] = in
	s.intentIDs = append(s.intentIDs, pi.ID)
	return pi.ID
}

func (in *intent) pay(at time.Time) {
	in.Status, in.received, in.charge, in.chargedAt, in.lastErr = "succeeded", in.Amount, newID("ch"), at, nil
}

// Succeed makes the intent id succeed now and returns the signed payment_intent.succeeded.
func (s *Server) Succeed(id string) (http.Header, []byte) {
	s.t.Helper()
	var obj map[string]any
	s.locked(func() {
		in := s.intent(id)
		in.pay(time.Now())
		obj = in.object(false)
	})
	return s.Event("payment_intent.succeeded", obj)
}

// Fail records a declined attempt on the intent id (it is requires_payment_method again, with
// last_payment_error code and message) and returns the signed payment_intent.payment_failed.
func (s *Server) Fail(id, code, message string) (http.Header, []byte) {
	s.t.Helper()
	var obj map[string]any
	s.locked(func() {
		in := s.intent(id)
		in.Status = "requires_payment_method"
		in.lastErr = map[string]any{"type": "card_error", "code": code, "message": message}
		obj = in.object(false)
	})
	return s.Event("payment_intent.payment_failed", obj)
}

// PaymentIntentObject is the intent id as Stripe's JSON object, for events a test builds.
func (s *Server) PaymentIntentObject(id string) map[string]any {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.intent(id).object(false)
}

// locked runs fn with s.mu held, released also when fn fails the test (t.Fatalf exits the
// goroutine, and a mutex left locked would hang the server's requests and its Close).
func (s *Server) locked(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn()
}

// intent is the intent id; s.mu is held.
func (s *Server) intent(id string) *intent {
	s.t.Helper()
	in, ok := s.intents[id]
	if !ok {
		s.t.Fatalf("stripetest: no payment intent %s", id)
	}
	return in
}

// SetRefundStatus sets the status refunds are created with from now on: succeeded (the
// default), pending, requires_action, failed or canceled.
func (s *Server) SetRefundStatus(status string) {
	s.t.Helper()
	if !validRefundStatus(status) {
		s.t.Fatalf("stripetest: refund status %q", status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextStatus = status
}

// CompleteRefund moves the refund id to status (succeeded, failed or canceled) and returns the
// signed event Stripe sends for it: refund.failed for failed, refund.updated otherwise.
func (s *Server) CompleteRefund(id, status string) (http.Header, []byte) {
	s.t.Helper()
	if !validRefundStatus(status) {
		s.t.Fatalf("stripetest: refund status %q", status)
	}
	var obj map[string]any
	s.locked(func() {
		re := s.refund(id)
		re.Status, re.FailureReason = status, ""
		if status == "failed" {
			re.FailureReason = "declined"
		}
		obj = re.object()
	})
	if status == "failed" {
		return s.Event("refund.failed", obj)
	}
	return s.Event("refund.updated", obj)
}

// ExpireIdempotencyKeys forgets every Idempotency-Key, as Stripe does after 24 hours: a
// request repeated after it is a new request.
func (s *Server) ExpireIdempotencyKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.idem)
}

// RefundObject is the refund id as Stripe's JSON object, for events a test builds.
func (s *Server) RefundObject(id string) map[string]any {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refund(id).object()
}

func (s *Server) refund(id string) *Refund {
	s.t.Helper()
	for _, re := range s.refunds {
		if re.ID == id {
			return re
		}
	}
	s.t.Fatalf("stripetest: no refund %s", id)
	return nil
}

// Refunds returns copies of the refunds the double created, oldest first.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, len(s.refunds))
	for i, re := range s.refunds {
		out[i] = *re
		out[i].Metadata = maps.Clone(re.Metadata)
	}
	return out
}

// Calls returns how many authenticated requests reached method path ("POST", "/v1/refunds"),
// idempotent replays and FailNext answers included.
func (s *Server) Calls(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method+" "+path]
}

// RefundCalls is Calls("POST", "/v1/refunds").
func (s *Server) RefundCalls() int { return s.Calls(http.MethodPost, "/v1/refunds") }

// FailNext makes the next authenticated request to method path answer status with a Stripe
// error of errType (api_error, card_error, invalid_request_error, idempotency_error) and code
// ("" for none): FailNext("POST", "/v1/refunds", 429, "invalid_request_error", "rate_limit").
// Calls queue up, one answer each.
func (s *Server) FailNext(method, path string, status int, errType, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := method + " " + path
	s.fail[k] = append(s.fail[k], apiError{status, errType, code, "stripetest: injected " + code})
}

// Event returns a webhook request of eventType with object (anything json.Marshal takes) as
// data.object, in the current API version, signed now: its headers and its body.
func (s *Server) Event(eventType string, object any) (http.Header, []byte) {
	s.t.Helper()
	body, err := json.Marshal(map[string]any{
		"id": newID("evt"), "object": "event", "api_version": stripego.APIVersion,
		"created": time.Now().Unix(), "livemode": false, "pending_webhooks": 1, "type": eventType,
		"request": map[string]any{"id": nil, "idempotency_key": nil},
		"data":    map[string]any{"object": object},
	})
	if err != nil {
		s.t.Fatalf("stripetest: event %s: %v", eventType, err)
	}
	return s.Sign(body, time.Now()), body
}

// Sign returns the headers of a webhook request with body signed at time at under the
// double's webhook secret (webhook.GenerateTestSignedPayload).
func (s *Server) Sign(body []byte, at time.Time) http.Header {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: s.secret, Timestamp: at})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(stripe.SignatureHeader, sp.Header)
	return h
}

func validRefundStatus(s string) bool {
	switch s {
	case "succeeded", "pending", "requires_action", "failed", "canceled":
		return true
	}
	return false
}

func newID(prefix string) string { return prefix + "_" + rand.Text()[:20] }

func (in *intent) object(expandCharge bool) map[string]any {
	m := map[string]any{
		"id": in.ID, "object": "payment_intent", "amount": in.Amount, "amount_received": in.received,
		"currency": in.Currency, "status": in.Status, "created": in.Created.Unix(), "livemode": false,
		"capture_method": "automatic", "metadata": maps.Clone(in.Metadata),
		"latest_charge": nil, "last_payment_error": in.lastErr,
	}
	switch {
	case in.charge != "" && expandCharge:
		m["latest_charge"] = map[string]any{
			"id": in.charge, "object": "charge", "amount": in.Amount, "amount_captured": in.received,
			"currency": in.Currency, "created": in.chargedAt.Unix(), "paid": true, "status": "succeeded",
			"payment_intent": in.ID, "metadata": maps.Clone(in.Metadata),
		}
	case in.charge != "":
		m["latest_charge"] = in.charge
	}
	return m
}

func (re *Refund) object() map[string]any {
	m := map[string]any{
		"id": re.ID, "object": "refund", "amount": re.Amount, "currency": re.Currency, "status": re.Status,
		"payment_intent": re.PaymentIntent, "charge": re.Charge, "metadata": maps.Clone(re.Metadata),
		"reason": nil, "created": re.Created.Unix(),
	}
	if re.Reason != "" {
		m["reason"] = re.Reason
	}
	if re.FailureReason != "" {
		m["failure_reason"] = re.FailureReason
	}
	return m
}

// serve answers one API request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, apiError{http.StatusUnauthorized, "invalid_request_error", "", "Invalid API Key provided"}, "")
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "parameter_invalid", err.Error()}, "")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := r.Method + " " + r.URL.Path
	s.calls[k]++
	if q := s.fail[k]; len(q) > 0 {
		s.fail[k] = q[1:]
		writeError(w, q[0], "")
		return
	}
	switch k {
	case "POST /v1/refunds":
		s.createRefund(w, r)
	case "GET /v1/refunds":
		s.listRefunds(w, r)
	case "GET /v1/payment_intents/search":
		s.searchIntents(w, r)
	default:
		writeError(w, apiError{http.StatusNotFound, "invalid_request_error", "", "Unrecognized request URL (" + k + ")"}, "")
	}
}

// createRefund is POST /v1/refunds; s.mu is held.
func (s *Server) createRefund(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	params := r.PostForm.Encode() // sorted by key: a fingerprint of the parameters
	if prev, ok := s.idem[key]; ok && key != "" {
		if prev.params != params {
			writeError(w, apiError{http.StatusBadRequest, "idempotency_error", "",
				"Keys for idempotent requests can only be used with the same parameters they were first used with."}, "")
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeBody(w, http.StatusOK, prev.body)
		return
	}
	meta := map[string]string{}
	for name := range r.PostForm {
		if k, ok := strings.CutPrefix(name, "metadata["); ok && strings.HasSuffix(k, "]") {
			meta[strings.TrimSuffix(k, "]")] = r.PostForm.Get(name)
			continue
		}
		switch name {
		case "payment_intent", "amount", "reason":
		default:
			writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "parameter_unknown", "Received unknown parameter: " + name}, name)
			return
		}
	}
	piID := r.PostForm.Get("payment_intent")
	in, ok := s.intents[piID]
	switch {
	case piID == "":
		writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "parameter_missing", "One of charge or payment_intent is required."}, "payment_intent")
		return
	case !ok:
		writeError(w, apiError{http.StatusNotFound, "invalid_request_error", "resource_missing", "No such payment_intent: '" + piID + "'"}, "payment_intent")
		return
	case in.Status != "succeeded":
		writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state",
			"This PaymentIntent does not have a successful charge to refund."}, "payment_intent")
		return
	}
	left := in.received
	for _, re := range s.refunds {
		if re.PaymentIntent == piID && re.Status != "failed" && re.Status != "canceled" {
			left -= re.Amount
		}
	}
	if left <= 0 {
		writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "charge_already_refunded", "Charge " + in.charge + " has already been refunded."}, "")
		return
	}
	amount := left
	if a := r.PostForm.Get("amount"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n <= 0 {
			writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer", "Invalid positive integer"}, "amount")
			return
		}
		amount = n
	}
	if amount > left {
		writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "amount_too_large",
			fmt.Sprintf("Refund amount (%d) is greater than unrefunded amount on charge (%d)", amount, left)}, "amount")
		return
	}
	reason := r.PostForm.Get("reason")
	switch reason {
	case "", "duplicate", "fraudulent", "requested_by_customer":
	default:
		writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "", "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer"}, "reason")
		return
	}
	re := &Refund{
		ID: newID("re"), PaymentIntent: piID, Charge: in.charge, Amount: amount, Currency: in.Currency,
		Status: s.nextStatus, Reason: reason, Metadata: meta, IdempotencyKey: key, Created: time.Now(),
	}
	if re.Status == "failed" {
		re.FailureReason = "declined"
	}
	body, err := json.Marshal(re.object())
	if err != nil {
		writeError(w, apiError{http.StatusInternalServerError, "api_error", "", "stripetest: " + err.Error()}, "")
		return
	}
	s.refunds = append(s.refunds, re)
	if key != "" {
		s.idem[key] = replay{params: params, body: body}
	}
	writeBody(w, http.StatusOK, body)
}

// listRefunds is GET /v1/refunds; s.mu is held.
func (s *Server) listRefunds(w http.ResponseWriter, r *http.Request) {
	piID := r.Form.Get("payment_intent")
	if _, ok := s.intents[piID]; piID != "" && !ok {
		writeError(w, apiError{http.StatusNotFound, "invalid_request_error", "resource_missing", "No such payment_intent: '" + piID + "'"}, "payment_intent")
		return
	}
	limit, ok := limitOf(w, r.Form)
	if !ok {
		return
	}
	var objs []any
	after := r.Form.Get("starting_after")
	started := after == ""
	hasMore := false
	for _, re := range slices.Backward(s.refunds) { // newest first
		if piID != "" && re.PaymentIntent != piID {
			continue
		}
		if !started {
			started = re.ID == after
			continue
		}
		if len(objs) == limit {
			hasMore = true
			break
		}
		objs = append(objs, re.object())
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "url": "/v1/refunds", "has_more": hasMore, "data": nonNil(objs)})
}

var (
	searchQuery = regexp.MustCompile(`^metadata\['([^'\\]+)'\]:'((?:[^'\\]|\\.)*)'$`)
	unescape    = regexp.MustCompile(`\\(.)`)
)

// searchIntents is GET /v1/payment_intents/search; s.mu is held.
func (s *Server) searchIntents(w http.ResponseWriter, r *http.Request) {
	m := searchQuery.FindStringSubmatch(r.Form.Get("query"))
	if m == nil {
		writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "parameter_invalid",
			"stripetest understands only metadata['key']:'value' queries, not " + strconv.Quote(r.Form.Get("query"))}, "query")
		return
	}
	key, value := m[1], unescape.ReplaceAllString(m[2], "$1")
	expand := false
	for name, vs := range r.Form {
		if strings.HasPrefix(name, "expand[") {
			for _, v := range vs {
				if v != "data.latest_charge" {
					writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "parameter_invalid", "stripetest cannot expand " + v}, "expand")
					return
				}
				expand = true
			}
		}
	}
	limit, ok := limitOf(w, r.Form)
	if !ok {
		return
	}
	from := 0
	if p := r.Form.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "parameter_invalid", "Invalid page"}, "page")
			return
		}
		from = n
	}
	var hits []any
	for _, id := range slices.Backward(s.intentIDs) { // newest first
		if v, ok := s.intents[id].Metadata[key]; ok && v == value {
			hits = append(hits, s.intents[id].object(expand))
		}
	}
	page := map[string]any{"object": "search_result", "url": "/v1/payment_intents/search", "has_more": false, "next_page": nil}
	hits = hits[min(from, len(hits)):]
	if len(hits) > limit {
		hits = hits[:limit]
		page["has_more"], page["next_page"] = true, strconv.Itoa(from+limit)
	}
	page["data"] = nonNil(hits)
	writeJSON(w, http.StatusOK, page)
}

// limitOf reads a list's limit (1-100, default 10), or answers 400 and returns false.
func limitOf(w http.ResponseWriter, form url.Values) (int, bool) {
	l := form.Get("limit")
	if l == "" {
		return 10, true
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 || n > 100 {
		writeError(w, apiError{http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer", "limit must be 1-100"}, "limit")
		return 0, false
	}
	return n, true
}

func nonNil(objs []any) []any {
	if objs == nil {
		return []any{}
	}
	return objs
}

func writeError(w http.ResponseWriter, e apiError, param string) {
	obj := map[string]any{"type": e.typ, "message": e.text}
	if e.code != "" {
		obj["code"] = e.code
	}
	if param != "" {
		obj["param"] = param
	}
	writeJSON(w, e.status, map[string]any{"error": obj})
}

// writeJSON answers status with v, or 500 when v does not encode (it is built of maps, strings
// and numbers: it always does).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"type":"api_error","message":"stripetest: encode"}}`)
	}
	writeBody(w, status, b)
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", newID("req"))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
