// Package sandbox is the payment provider for local runs and tests: notifications are signed
// with HMAC-SHA256 over the raw body under a shared secret (hex in X-Sandbox-Signature), and
// refunds complete instantly.
package sandbox

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// Name is the provider's name in POST /v1/callbacks/sandbox.
const Name = "sandbox"

// SignatureHeader carries the hex HMAC-SHA256 of the raw body.
const SignatureHeader = "X-Sandbox-Signature"

// Provider is the sandbox payment provider.
type Provider struct {
	secret []byte
}

var (
	_ payment.Provider = (*Provider)(nil)
	_ payment.Refunder = (*Provider)(nil)
)

// New returns the sandbox provider signing with secret, which must not be empty.
func New(secret string) (*Provider, error) {
	if secret == "" {
		return nil, errors.New("sandbox provider: empty secret")
	}
	return &Provider{secret: []byte(secret)}, nil
}

// Name implements payment.Provider.
func (*Provider) Name() string { return Name }

// Sign returns the signature of body, as the sandbox sends it in SignatureHeader.
func (p *Provider) Sign(body []byte) string {
	m := hmac.New(sha256.New, p.secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// body is the sandbox notification; every field is required and no other is accepted.
type body struct {
	ProviderTxnID *string `json:"provider_txn_id"`
	OrderID       *string `json:"order_id"`
	Amount        *int64  `json:"amount"`
	Currency      *string `json:"currency"`
	Status        *string `json:"status"`
}

// Verify implements payment.Provider: the signature is checked (in constant time) before the
// body is parsed.
func (p *Provider) Verify(h http.Header, raw []byte) (payment.Notification, error) {
	sig := h.Get(SignatureHeader)
	if sig == "" {
		return payment.Notification{}, fmt.Errorf("sandbox: %w: no %s header", payment.ErrInvalidSignature, SignatureHeader)
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("sandbox: %w: %s is not hex", payment.ErrInvalidSignature, SignatureHeader)
	}
	m := hmac.New(sha256.New, p.secret)
	m.Write(raw)
	if !hmac.Equal(got, m.Sum(nil)) {
		return payment.Notification{}, fmt.Errorf("sandbox: %w", payment.ErrInvalidSignature)
	}

	var b body
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return payment.Notification{}, fmt.Errorf("sandbox: %w: %v", payment.ErrMalformedNotification, err)
	}
	if dec.More() {
		return payment.Notification{}, fmt.Errorf("sandbox: %w: trailing data after the JSON object", payment.ErrMalformedNotification)
	}
	if b.ProviderTxnID == nil || b.OrderID == nil || b.Amount == nil || b.Currency == nil || b.Status == nil {
		return payment.Notification{}, fmt.Errorf("sandbox: %w: provider_txn_id, order_id, amount, currency and status are required", payment.ErrMalformedNotification)
	}
	outcome, err := payment.ParseOutcome(*b.Status)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("sandbox: %w", err)
	}
	n := payment.Notification{
		Provider: Name, ProviderTxnID: *b.ProviderTxnID, OrderID: *b.OrderID,
		Amount: *b.Amount, Currency: *b.Currency, Outcome: outcome,
	}
	if err := n.Validate(); err != nil {
		return payment.Notification{}, fmt.Errorf("sandbox: %w", err)
	}
	return n, nil
}

// Refund implements payment.Refunder: the sandbox refunds at once, and the same RefundID
// always yields the same provider refund id.
func (*Provider) Refund(_ context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	if r.RefundID == "" {
		return payment.RefundResult{}, errors.New("sandbox refund: empty refund id")
	}
	return payment.RefundResult{ProviderRefundID: "sandbox-" + r.RefundID, Status: payment.RefundSucceeded}, nil
}

// QueryRefund implements payment.Refunder: every sandbox refund succeeded the moment it was
// asked for, so asking again is the same answer.
func (p *Provider) QueryRefund(ctx context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	return p.Refund(ctx, r)
}
