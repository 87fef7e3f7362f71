package payment

import (
	"context"
	"fmt"
	"net/http"
	"sort"
)

// Provider is one payment provider's notification scheme. Implementations live in
// internal/provider/<name>; the sandbox is the first, Stripe (Stripe-Signature, HMAC over
// "t.body"), WeChat Pay v3 (RSA/SHA256 over timestamp, nonce and body, AES-GCM resource) and
// Alipay (RSA2 over the sorted form) plug in the same way.
type Provider interface {
	// Name is the provider's path segment in POST /v1/callbacks/{provider}.
	Name() string
	// Verify authenticates a notification from its request headers h and its raw body (the
	// bytes as received: signatures are over them, not over a re-encoding) and returns it. It
	// returns an error wrapping ErrInvalidSignature when the request is not provably from the
	// provider — checked before the body is interpreted at all — and one wrapping
	// ErrMalformedNotification when it is authentic but not understood. The returned
	// Notification has Provider set to Name() and passes Validate.
	Verify(h http.Header, body []byte) (Notification, error)
}

// RefundRequest asks a provider to pay a payment back in full.
type RefundRequest struct {
	RefundID      string // our id; the provider's idempotency key (Stripe Idempotency-Key, WeChat out_refund_no, Alipay out_request_no)
	PaymentID     string
	ProviderTxnID string
	Amount        int64
	Currency      string
}

// Refunder is implemented by providers that can refund. Refund returns the provider's refund
// id once the provider has accepted the refund; calling it again with the same RefundID must
// not refund twice.
//
// Refund is called inside the transaction that marks the payment refunded, which is right for
// the sandbox (instant, local). A networked provider needs the two-step flow instead — store
// the refund as requested, call the provider outside the transaction with RefundID as its
// idempotency key, complete on its answer or refund notification — which is not built yet.
type Refunder interface {
	Refund(ctx context.Context, r RefundRequest) (providerRefundID string, err error)
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
