package sandbox_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
)

const good = `{"provider_txn_id":"txn-1","order_id":"ord-1","amount":9800,"currency":"CNY","status":"succeeded"}`

func provider(t *testing.T) *sandbox.Provider {
	t.Helper()
	p, err := sandbox.New("test-secret")
	require.NoError(t, err)
	return p
}

func signed(p *sandbox.Provider, body string) http.Header {
	h := http.Header{}
	h.Set(sandbox.SignatureHeader, p.Sign([]byte(body)))
	return h
}

func TestVerifyAcceptsASignedNotification(t *testing.T) {
	p := provider(t)
	n, err := p.Verify(signed(p, good), []byte(good))
	require.NoError(t, err)
	assert.Equal(t, payment.Notification{Provider: "sandbox", ProviderTxnID: "txn-1", OrderID: "ord-1", Amount: 9800, Currency: "CNY", Outcome: payment.OutcomeSucceeded}, n)

	failed := strings.Replace(good, `"succeeded"`, `"failed"`, 1)
	n, err = p.Verify(signed(p, failed), []byte(failed))
	require.NoError(t, err)
	assert.Equal(t, payment.OutcomeFailed, n.Outcome)
}

func TestVerifySignatureFailures(t *testing.T) {
	p := provider(t)
	other, err := sandbox.New("other-secret")
	require.NoError(t, err)
	tests := []struct {
		name   string
		header http.Header
		body   string
	}{
		{"missing", http.Header{}, good},
		{"not hex", http.Header{sandbox.SignatureHeader: {"zz-not-hex"}}, good},
		{"other secret", signed(other, good), good},
		{"body changed after signing", signed(p, good), strings.Replace(good, "9800", "9801", 1)},
		{"whitespace added after signing", signed(p, good), good + " "},
		{"truncated signature", http.Header{sandbox.SignatureHeader: {p.Sign([]byte(good))[:32]}}, good},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Verify(tc.header, []byte(tc.body))
			assert.ErrorIs(t, err, payment.ErrInvalidSignature)
		})
	}
}

func TestVerifyMalformedButSigned(t *testing.T) {
	p := provider(t)
	for name, body := range map[string]string{
		"not json":       `{"provider_txn_id":`,
		"unknown field":  `{"provider_txn_id":"t","order_id":"o","amount":1,"currency":"CNY","status":"succeeded","tip":5}`,
		"missing amount": `{"provider_txn_id":"t","order_id":"o","currency":"CNY","status":"succeeded"}`,
		"float amount":   `{"provider_txn_id":"t","order_id":"o","amount":98.5,"currency":"CNY","status":"succeeded"}`,
		"bad status":     `{"provider_txn_id":"t","order_id":"o","amount":1,"currency":"CNY","status":"pending"}`,
		"zero amount":    `{"provider_txn_id":"t","order_id":"o","amount":0,"currency":"CNY","status":"succeeded"}`,
		"trailing data":  good + `{}`,
		"array":          `[]`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := p.Verify(signed(p, body), []byte(body))
			assert.ErrorIs(t, err, payment.ErrMalformedNotification)
		})
	}
}

func TestRefundIsInstantAndIdempotent(t *testing.T) {
	p := provider(t)
	a, err := p.Refund(context.Background(), payment.RefundRequest{RefundID: "refund-1"})
	require.NoError(t, err)
	b, err := p.Refund(context.Background(), payment.RefundRequest{RefundID: "refund-1"})
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

func TestEmptySecretIsRefused(t *testing.T) {
	_, err := sandbox.New("")
	assert.Error(t, err)
}
