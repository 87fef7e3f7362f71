package httpapi

import (
	"net/http"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// Codes the decoders answer with themselves.
var (
	codePaymentNotFound = httpx.NewCode(http.StatusNotFound, "payment_not_found")
	codeMissingOrderID  = httpx.NewCode(http.StatusBadRequest, "missing_order_id")
)

// errs maps every error a use case returns to its HTTP status and stable code: the one place
// that does. Request-shape errors (body_too_large, unreadable_body) come from httpx as
// *httpx.Error already. The client reads the error from the sentinel on, without the
// operation names wrapped around it for the logs.
var errs = httpx.Table{Message: httpx.FromSentinel, Rules: []httpx.Rule{
	{Err: payment.ErrUnknownProvider, Code: httpx.NewCode(http.StatusNotFound, "unknown_provider")},
	// An invalid signature says no more than that: which check failed is for our logs, not for
	// a caller probing the scheme.
	{Err: payment.ErrInvalidSignature, Code: httpx.NewCode(http.StatusUnauthorized, "invalid_signature"), Message: httpx.SentinelOnly},
	{Err: payment.ErrMalformedNotification, Code: httpx.NewCode(http.StatusBadRequest, "malformed_notification")},
	// 503: not our fault and not the provider's, and it will pass — the provider retries.
	{Err: payment.ErrOrderUnknown, Code: httpx.NewCode(http.StatusServiceUnavailable, "order_unknown")},
	// 503 too: a refund confirmation whose payment's own notification has not reached us yet.
	{Err: payment.ErrTxnUnknown, Code: httpx.NewCode(http.StatusServiceUnavailable, "transaction_unknown")},
	{Err: payment.ErrNotFound, Code: codePaymentNotFound},
}}
