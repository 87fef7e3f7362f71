// Package httpapi is payment-adapter's HTTP API (DESIGN §9): the providers' asynchronous
// payment callbacks and a read API over payments, as go-kit endpoints with one error mapping
// (errors.go).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// Handler returns the payment-adapter API:
//
//	POST /v1/callbacks/{provider}   a provider's payment notification → 200 (also for a duplicate)
//	GET  /v1/payments/{id}          one payment
//	GET  /v1/payments?order_id=     the payments of an order, oldest first
//	GET  /healthz, GET /readyz      liveness; readiness is ready() == nil
//
// Callback errors: 404 unknown_provider, 413 body_too_large, 401 invalid_signature,
// 400 malformed_notification, 503 order_unknown and 503 transaction_unknown (the provider
// retries; see app.Service.HandleCallback). Nothing is stored for any of them. An ignored
// notification is 200 with nothing stored. A provider that expects an answer of its own
// (payment.Replier: WeChat Pay's JSON, Alipay's "success") gets it, with the same status;
// the others get the JSON below.
//
// Who: callbacks carry no token — the provider's signature is their authentication; reading
// payments needs a viewer, staff or service token (pkg/auth).
func Handler(svc *app.Service, log *slog.Logger, ready func(context.Context) error, v *auth.Verifier) http.Handler {
	mux := http.NewServeMux()
	t := httpx.Transport{Log: log, Errors: errs}
	e := endpoints{svc}
	mux.Handle("POST /v1/callbacks/{provider}", callbackServer(t, e))
	mux.Handle("GET /v1/payments/{id}", v.Require(httpx.Server(t, decodePaymentID, e.getPayment), auth.Readers...))
	mux.Handle("GET /v1/payments", v.Require(httpx.Server(t, decodeList, e.listPayments), auth.Readers...))
	httpx.Health(mux, ready)
	httpx.NotFound(mux)
	return mux
}

// endpoints are the API's use cases, one method per route.
type endpoints struct{ svc *app.Service }

// --- views ---

type refundView struct {
	RefundID         string     `json:"refund_id"`
	ProviderRefundID string     `json:"provider_refund_id,omitempty"`
	Status           string     `json:"status"` // requested, pending, succeeded or failed
	Reason           string     `json:"reason,omitempty"`
	RequestedAt      time.Time  `json:"requested_at"`
	RefundedAt       *time.Time `json:"refunded_at,omitempty"`
	Attempts         int        `json:"attempts"` // provider calls that failed transiently
	NextAttemptAt    *time.Time `json:"next_attempt_at,omitempty"`
	LastError        string     `json:"last_error,omitempty"`
}

type paymentView struct {
	PaymentID     string      `json:"payment_id"`
	OrderID       string      `json:"order_id"`
	Provider      string      `json:"provider"`
	ProviderTxnID string      `json:"provider_txn_id"`
	Amount        int64       `json:"amount"`
	Currency      string      `json:"currency"`
	Status        string      `json:"status"`
	FailureReason string      `json:"failure_reason,omitempty"`
	Refund        *refundView `json:"refund,omitempty"`
	// Redrives: copies of payment.succeeded the paid_not_sold job re-published, the last at
	// RedrivenAt (stock had not sold the order).
	Redrives   int        `json:"redrives,omitempty"`
	RedrivenAt *time.Time `json:"redriven_at,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

func viewPayment(p *payment.Payment) paymentView {
	s := p.Snapshot()
	v := paymentView{
		PaymentID: s.ID, OrderID: s.OrderID, Provider: s.Provider, ProviderTxnID: s.ProviderTxnID,
		Amount: s.Amount, Currency: s.Currency, Status: s.Status.String(), FailureReason: s.FailureReason,
		Redrives: s.Redrives, RedrivenAt: timePtr(s.RedrivenAt), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	if r := s.Refund; r != nil {
		v.Refund = &refundView{RefundID: r.ID, ProviderRefundID: r.ProviderRefundID, Status: r.State.String(), Reason: r.Reason,
			RequestedAt: r.RequestedAt, RefundedAt: timePtr(r.At), Attempts: r.Attempts, NextAttemptAt: timePtr(r.NextAttemptAt),
			LastError: r.LastError}
	}
	return v
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// --- callback ---

type callbackRequest struct {
	provider string
	header   http.Header
	body     []byte
}

type callbackResponse struct {
	Received     bool   `json:"received"`
	Duplicate    bool   `json:"duplicate"`
	Ignored      bool   `json:"ignored,omitempty"`
	PaymentID    string `json:"payment_id,omitempty"`
	Status       string `json:"status,omitempty"`
	RefundStatus string `json:"refund_status,omitempty"` // of a refund confirmation
	Unmatched    bool   `json:"unmatched,omitempty"`     // a refund confirmation for no refund we requested
	provider     string
}

// decodeCallback keeps the raw body: signatures are over its exact bytes.
func decodeCallback(_ context.Context, r *http.Request) (callbackRequest, error) {
	body, err := httpx.ReadBody(r)
	return callbackRequest{provider: r.PathValue("provider"), header: r.Header, body: body}, err
}

func (e endpoints) callback(ctx context.Context, req callbackRequest) (callbackResponse, error) {
	res, err := e.svc.HandleCallback(ctx, req.provider, req.header, req.body)
	if err != nil {
		return callbackResponse{}, err
	}
	out := callbackResponse{Received: true, Duplicate: res.Duplicate, Ignored: res.Ignored, Unmatched: res.Unmatched, provider: req.provider}
	if p := res.Payment; p != nil {
		out.PaymentID, out.Status = p.ID(), p.Status().String()
		if r := p.Refund(); r != nil && res.RefundNotice {
			out.RefundStatus = r.State.String()
		}
	}
	return out, nil
}

// providerKey carries the callback's provider from the request to the error encoder.
type providerKey struct{}

// callbackServer is the callback route: the answers of callback's table and errors, written
// as the provider's payment.Replier says when it has one, as the adapter's JSON otherwise.
func callbackServer(t httpx.Transport, e endpoints) *kithttp.Server {
	encode := func(ctx context.Context, w http.ResponseWriter, resp any) error {
		if r, ok := resp.(callbackResponse); ok {
			if rp := e.svc.Replier(r.provider); rp != nil {
				return reply(w, rp, http.StatusOK, nil)
			}
		}
		return httpx.EncodeJSON(ctx, w, resp)
	}
	return kithttp.NewServer(httpx.Endpoint(e.callback), httpx.Decoder(decodeCallback), encode,
		kithttp.ServerBefore(func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, providerKey{}, r.PathValue("provider"))
		}),
		kithttp.ServerErrorEncoder(func(ctx context.Context, err error, w http.ResponseWriter) {
			he := t.Errors.Error(err) // as httpx.ServerOptions maps it
			if he.Status >= 500 {
				t.Log.ErrorContext(ctx, "request failed", "err", err)
			}
			name, _ := ctx.Value(providerKey{}).(string)
			if rp := e.svc.Replier(name); rp != nil {
				_ = reply(w, rp, he.Status, err)
				return
			}
			httpx.WriteError(w, he)
		}))
}

// reply writes rp's answer to a callback answered with status (err nil for a 2xx).
func reply(w http.ResponseWriter, rp payment.Replier, status int, err error) error {
	ct, body := rp.Reply(status, err)
	if ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(status)
	_, werr := w.Write(body)
	return werr
}

// --- read ---

func decodePaymentID(_ context.Context, r *http.Request) (string, error) {
	id := r.PathValue("id")
	if id == "" || len(id) > 64 {
		return "", codePaymentNotFound.Errorf("no payment %q", id)
	}
	return id, nil
}

func (e endpoints) getPayment(ctx context.Context, id string) (paymentView, error) {
	p, err := e.svc.Get(ctx, id)
	if err != nil {
		return paymentView{}, err
	}
	return viewPayment(p), nil
}

type listRequest struct{ orderID string }

type listResponse struct {
	OrderID  string        `json:"order_id"`
	Payments []paymentView `json:"payments"`
}

func decodeList(_ context.Context, r *http.Request) (listRequest, error) {
	id := r.URL.Query().Get("order_id")
	if id == "" || len(id) > 128 {
		return listRequest{}, codeMissingOrderID.Errorf("GET /v1/payments needs ?order_id=<order id>")
	}
	return listRequest{orderID: id}, nil
}

func (e endpoints) listPayments(ctx context.Context, req listRequest) (listResponse, error) {
	ps, err := e.svc.ListByOrder(ctx, req.orderID)
	if err != nil {
		return listResponse{}, err
	}
	out := listResponse{OrderID: req.orderID, Payments: make([]paymentView, len(ps))}
	for i, p := range ps {
		out.Payments[i] = viewPayment(p)
	}
	return out, nil
}
