package app_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
)

// stub is a provider of the tests' own, speaking the adapter's interfaces the way a real
// provider's package does: notifications signed like the sandbox's (HMAC over the raw body),
// payment notices in the sandbox's shape, refund notices as {"refund_of": txn, "refund_id",
// "provider_refund_id", "status"}, {"event": "other"} as a kind it does not act on; refunds
// that answer what the test says (succeeded at once, pending until settled, failed, refused
// or down); refund queries and payment queries from what it holds; answers in its own format
// (Replier).
type stub struct {
	sb *sandbox.Provider

	mu sync.Mutex
	// refundAnswer is what Refund answers a new refund: succeeded by default.
	refundAnswer payment.RefundStatus
	refundErr    error                           // when set, Refund fails with it (and records nothing)
	queryErr     error                           // when set, QueryRefund fails with it
	refunds      map[string]payment.RefundResult // by our refund id: what the provider holds
	calls        map[string]int                  // Refund calls by refund id
	payments     map[string]payment.Notification // by order id: what QueryPayment finds
	paymentErr   error
}

var (
	_ payment.Provider = (*stub)(nil)
	_ payment.Refunder = (*stub)(nil)
	_ payment.Querier  = (*stub)(nil)
	_ payment.Replier  = (*stub)(nil)
)

func newStub(secret string) *stub {
	sb, err := sandbox.New(secret)
	if err != nil {
		panic(err)
	}
	return &stub{sb: sb, refundAnswer: payment.RefundSucceeded, refunds: map[string]payment.RefundResult{},
		calls: map[string]int{}, payments: map[string]payment.Notification{}}
}

func (*stub) Name() string { return "stub" }

func (s *stub) sign(body []byte) http.Header {
	h := http.Header{}
	h.Set(sandbox.SignatureHeader, s.sb.Sign(body))
	return h
}

func (s *stub) Verify(h http.Header, body []byte) (payment.Notification, error) {
	if !hmac.Equal([]byte(h.Get(sandbox.SignatureHeader)), []byte(s.sb.Sign(body))) {
		return payment.Notification{}, fmt.Errorf("stub: %w", payment.ErrInvalidSignature)
	}
	var probe struct {
		Event            string `json:"event"`
		RefundOf         string `json:"refund_of"`
		RefundID         string `json:"refund_id"`
		ProviderRefundID string `json:"provider_refund_id"`
		Status           string `json:"status"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return payment.Notification{}, fmt.Errorf("stub: %w: %v", payment.ErrMalformedNotification, err)
	}
	switch {
	case probe.Event != "":
		return payment.Notification{}, fmt.Errorf("stub: %w: event %s", payment.ErrIgnoredNotification, probe.Event)
	case probe.RefundOf != "":
		st := map[string]payment.RefundStatus{"pending": payment.RefundPending, "succeeded": payment.RefundSucceeded, "failed": payment.RefundFailed}[probe.Status]
		n := payment.Notification{Provider: "stub", ProviderTxnID: probe.RefundOf,
			Refund: &payment.RefundNotice{RefundID: probe.RefundID, ProviderRefundID: probe.ProviderRefundID, Status: st}}
		if err := n.Validate(); err != nil {
			return payment.Notification{}, fmt.Errorf("stub: %w", err)
		}
		return n, nil
	}
	h2 := http.Header{}
	h2.Set(sandbox.SignatureHeader, s.sb.Sign(body))
	n, err := s.sb.Verify(h2, body)
	n.Provider = "stub"
	return n, err
}

func (*stub) Reply(status int, err error) (string, []byte) {
	if err != nil {
		return "text/plain", []byte("fail")
	}
	return "text/plain", []byte("success")
}

func (s *stub) Refund(_ context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[r.RefundID]++
	if s.refundErr != nil {
		return payment.RefundResult{}, s.refundErr
	}
	if res, ok := s.refunds[r.RefundID]; ok {
		return res, nil // the idempotency key: the same refund, never a second
	}
	res := payment.RefundResult{ProviderRefundID: "stub-" + r.RefundID, Status: s.refundAnswer}
	if s.refundAnswer == payment.RefundFailed {
		res.Reason = "account closed"
	}
	s.refunds[r.RefundID] = res
	return res, nil
}

func (s *stub) QueryRefund(_ context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queryErr != nil {
		return payment.RefundResult{}, s.queryErr
	}
	res, ok := s.refunds[r.RefundID]
	if !ok {
		return payment.RefundResult{}, fmt.Errorf("stub: refund %s: %w", r.RefundID, payment.ErrNotFound)
	}
	return res, nil
}

func (s *stub) QueryPayment(_ context.Context, orderID string) (payment.Notification, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paymentErr != nil {
		return payment.Notification{}, s.paymentErr
	}
	n, ok := s.payments[orderID]
	if !ok {
		return payment.Notification{}, fmt.Errorf("stub: order %s: %w", orderID, payment.ErrNotFound)
	}
	return n, nil
}

// settle makes the provider's refund refundID end in st (the money came back, or not).
func (s *stub) settle(refundID string, st payment.RefundStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.refunds[refundID]
	res.Status = st
	s.refunds[refundID] = res
}

func (s *stub) set(f func(s *stub)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *stub) callsOf(refundID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[refundID]
}

var errDown = errors.New("stub: connection refused")

func refundNotice(txn, refundID, providerRefundID, status string) []byte {
	fields := []string{fmt.Sprintf(`"refund_of":%q`, txn), fmt.Sprintf(`"status":%q`, status)}
	if refundID != "" {
		fields = append(fields, fmt.Sprintf(`"refund_id":%q`, refundID))
	}
	if providerRefundID != "" {
		fields = append(fields, fmt.Sprintf(`"provider_refund_id":%q`, providerRefundID))
	}
	return []byte("{" + strings.Join(fields, ",") + "}")
}
