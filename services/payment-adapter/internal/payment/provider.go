package payment

import (
	"context"
	"fmt"
	"net/http"
	"sort"
)

// Provider is one payment provider's notification scheme. Implementations live in
// internal/provider/<name>: sandbox (local runs and demos), stripe, wechatpay (API v3) and
// alipay.
type Provider interface {
	// Name is the provider's path segment in POST /v1/callbacks/{provider}.
	Name() string
	// Verify authenticates a notification from its request headers h and its raw body (the
	// bytes as received: signatures are over them, not over a re-encoding) and returns it. It
	// returns an error wrapping ErrInvalidSignature when the request is not provably from the
	// provider — checked before the body is interpreted at all, and including a timestamp
	// outside the provider's tolerance — and one wrapping ErrMalformedNotification when it is
	// authentic but not understood. An authentic notification of a kind the adapter does not
	// act on (another Stripe event type, a WeChat event type it does not know) returns an
	// error wrapping ErrIgnoredNotification: it is acknowledged with a 2xx and stores nothing.
	// The returned Notification has Provider set to Name() and passes Validate.
	Verify(h http.Header, body []byte) (Notification, error)
}

// Replier is implemented by providers that expect a particular answer to a callback (WeChat
// Pay: an empty 200/204, or {"code":"FAIL","message":…} with a 4xx/5xx; Alipay: the text
// "success", or "fail"). status is the HTTP status the adapter answers with (2xx when the
// notification was taken, or was a duplicate or ignored); err is nil then. Providers without
// it get the adapter's JSON.
type Replier interface {
	Reply(status int, err error) (contentType string, body []byte)
}

// RefundRequest asks a provider to pay a payment back in full.
type RefundRequest struct {
	RefundID      string // our id; the provider's idempotency key (Stripe Idempotency-Key, WeChat out_refund_no, Alipay out_request_no)
	PaymentID     string
	OrderID       string // our order id: the out_trade_no the payment was made under (WeChat, Alipay)
	ProviderTxnID string
	Amount        int64  // minor units: the whole payment
	Currency      string // ISO 4217
	Reason        string
}

// RefundStatus is where a provider says a refund stands.
type RefundStatus struct{ name string }

// Refund statuses a provider reports. Pending: accepted, the money is not back yet (WeChat
// PROCESSING, Stripe pending); the confirmation comes by notification or query. Succeeded:
// the money is back. Failed: the provider will not pay it back (WeChat ABNORMAL/CLOSED,
// Stripe failed/canceled) — for a human.
var (
	RefundPending   = RefundStatus{"pending"}
	RefundSucceeded = RefundStatus{"succeeded"}
	RefundFailed    = RefundStatus{"failed"}
)

func (s RefundStatus) String() string { return s.name }

// RefundResult is a provider's answer about one refund.
type RefundResult struct {
	ProviderRefundID string
	Status           RefundStatus
	Reason           string // the provider's words for a failed refund
}

// Refunder is implemented by providers that can refund. Refund asks for the refund of r and
// returns where it stands; calling it again with the same RefundID must never refund twice
// (the provider's idempotency key). QueryRefund asks where the refund r.RefundID stands; it
// returns an error wrapping ErrNotFound when the provider has no such refund (it was never
// requested, so requesting it is safe).
//
// Both are network calls to the provider: they are never made inside a database transaction.
// Errors are transient unless they wrap ErrProviderRefused (the provider answered that the
// request can never succeed: not refundable, wrong amount, unknown transaction).
type Refunder interface {
	Refund(ctx context.Context, r RefundRequest) (RefundResult, error)
	QueryRefund(ctx context.Context, r RefundRequest) (RefundResult, error)
}

// Querier is implemented by providers that can say, when asked, what became of an order's
// payment — how a lost callback is found (WeChat: query by out_trade_no; Alipay:
// alipay.trade.query; Stripe: a PaymentIntent search on metadata order_id). QueryPayment
// returns the payment made for orderID as a Notification (built and validated as Verify
// would), or an error wrapping ErrNotFound when the provider has no payment for it, or only
// one still waiting for the buyer.
type Querier interface {
	QueryPayment(ctx context.Context, orderID string) (Notification, error)
}

// Registry holds the configured providers by name.
type Registry struct {
	providers map[string]Provider
}

// NewRegistry returns a registry of ps; two providers with one name are an error.
func NewRegistry(ps ...Provider) (*Registry, error) {
	r := &Registry{providers: make(map[string]Provider, len(ps))}
	for _, p := range ps {
		if p == nil || p.Name() == "" {
			return nil, fmt.Errorf("payment registry: provider without name")
		}
		if _, dup := r.providers[p.Name()]; dup {
			return nil, fmt.Errorf("payment registry: provider %q registered twice", p.Name())
		}
		r.providers[p.Name()] = p
	}
	return r, nil
}

// Provider returns the provider called name, or an error wrapping ErrUnknownProvider.
func (r *Registry) Provider(name string) (Provider, error) {
	p, ok := r.providers[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownProvider, name)
	}
	return p, nil
}

// Refunder returns the refunder of the provider called name. It returns an error wrapping
// ErrUnknownProvider when there is no such provider, and a plain error when the provider
// cannot refund.
func (r *Registry) Refunder(name string) (Refunder, error) {
	p, err := r.Provider(name)
	if err != nil {
		return nil, err
	}
	rf, ok := p.(Refunder)
	if !ok {
		return nil, fmt.Errorf("payment provider %q cannot refund", name)
	}
	return rf, nil
}

// Names returns the registered provider names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.providers))
	for n := range r.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Replier returns the Replier of the provider called name, or nil when there is no such
// provider or it answers with the adapter's JSON.
func (r *Registry) Replier(name string) Replier {
	rp, _ := r.providers[name].(Replier)
	return rp
}

// Queriers returns the names of the registered providers that can be asked for an order's
// payment (Querier), sorted.
func (r *Registry) Queriers() []string {
	var names []string
	for _, n := range r.Names() {
		if _, ok := r.providers[n].(Querier); ok {
			names = append(names, n)
		}
	}
	return names
}

// Querier returns the querier of the provider called name. It returns an error wrapping
// ErrUnknownProvider when there is no such provider, and a plain error when the provider
// cannot be asked.
func (r *Registry) Querier(name string) (Querier, error) {
	p, err := r.Provider(name)
	if err != nil {
		return nil, err
	}
	q, ok := p.(Querier)
	if !ok {
		return nil, fmt.Errorf("payment provider %q cannot be asked for payments", name)
	}
	return q, nil
}
