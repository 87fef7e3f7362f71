package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// codes maps every error a use case returns to its HTTP status and stable code: the one place
// that does. Request-shape errors (body_too_large, unreadable_body) come from httpx as
// *httpx.Error already.
var codes = []struct {
	err    error
	status int
	code   string
}{
	{payment.ErrUnknownProvider, http.StatusNotFound, "unknown_provider"},
	{payment.ErrInvalidSignature, http.StatusUnauthorized, "invalid_signature"},
	{payment.ErrMalformedNotification, http.StatusBadRequest, "malformed_notification"},
	// 503: not our fault and not the provider's, and it will pass — the provider retries.
	{payment.ErrOrderUnknown, http.StatusServiceUnavailable, "order_unknown"},
	{payment.ErrNotFound, http.StatusNotFound, "payment_not_found"},
}

func mapError(err error) *httpx.Error {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return &httpx.Error{Status: c.status, Code: c.code, Message: fromSentinel(err, c.err)}
		}
	}
	return nil
}

// fromSentinel is the part of err from the sentinel on ("invalid signature"), without the
// operation names wrapped around it for the logs. An invalid signature says no more than
// that: which check failed is for our logs, not for a caller probing the scheme.
func fromSentinel(err, sentinel error) string {
	if errors.Is(sentinel, payment.ErrInvalidSignature) {
		return sentinel.Error()
	}
	s := err.Error()
	if i := strings.Index(s, sentinel.Error()); i > 0 {
		return s[i:]
	}
	return s
}
