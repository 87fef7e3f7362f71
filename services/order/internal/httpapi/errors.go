package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/catalog"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// codes maps every error a use case returns to its HTTP status and stable code: the one place
// that does. Request-shape errors (malformed_json, body_too_large, unreadable_body) come from
// httpx as *httpx.Error already.
var codes = []struct {
	err    error
	status int
	code   string
}{
	{app.ErrMissingIdempotencyKey, http.StatusBadRequest, "missing_idempotency_key"},
	{app.ErrInvalidIdempotencyKey, http.StatusBadRequest, "invalid_idempotency_key"},
	{app.ErrIdempotencyConflict, http.StatusConflict, "idempotency_conflict"},
	{order.ErrInvalidBuyer, http.StatusUnprocessableEntity, "invalid_buyer_id"},
	{order.ErrInvalidItems, http.StatusUnprocessableEntity, "invalid_items"},
	{order.ErrInvalidSKU, http.StatusUnprocessableEntity, "invalid_sku"},
	{order.ErrInvalidQty, http.StatusUnprocessableEntity, "invalid_qty"},
	{order.ErrInvalidPrice, http.StatusUnprocessableEntity, "invalid_unit_price"},
	{order.ErrDuplicateSKU, http.StatusUnprocessableEntity, "duplicate_sku"},
	{order.ErrTotalOverflow, http.StatusUnprocessableEntity, "total_overflow"},
	{order.ErrInvalidCurrency, http.StatusUnprocessableEntity, "invalid_currency"},
	{order.ErrInvalidTimeout, http.StatusUnprocessableEntity, "invalid_payment_timeout"},
	{order.ErrInvalidReason, http.StatusUnprocessableEntity, "invalid_reason"},
	{app.ErrRateLimited, http.StatusTooManyRequests, "rate_limited"},
	{app.ErrNotForSale, http.StatusUnprocessableEntity, "sku_not_for_sale"},
	{app.ErrPriceMismatch, http.StatusConflict, "price_mismatch"},
	{app.ErrCurrencyMismatch, http.StatusUnprocessableEntity, "currency_mismatch"},
	{app.ErrPaymentTimeoutTooLong, http.StatusUnprocessableEntity, "payment_timeout_too_long"},
	{catalog.ErrInvalidSKU, http.StatusUnprocessableEntity, "invalid_sku"},
	{catalog.ErrInvalidPrice, http.StatusUnprocessableEntity, "invalid_unit_price"},
	{catalog.ErrInvalidCurrency, http.StatusUnprocessableEntity, "invalid_currency"},
	{catalog.ErrInvalidWindow, http.StatusUnprocessableEntity, "invalid_payment_window"},
	{catalog.ErrInvalidOperator, http.StatusUnprocessableEntity, "invalid_operator"},
	{catalog.ErrNotFound, http.StatusNotFound, "price_not_found"},
	// Errors from the store carry its operation names; the client sees the message from the
	// sentinel on. Validation errors keep their whole text: it names the offending line.
	{order.ErrNotFound, http.StatusNotFound, "order_not_found"},
	{order.ErrInvalidTransition, http.StatusConflict, "invalid_transition"},
}

func mapError(err error) *httpx.Error {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			msg := err.Error()
			if c.status == http.StatusNotFound || c.status == http.StatusConflict {
				msg = fromSentinel(err, c.err)
			}
			return &httpx.Error{Status: c.status, Code: c.code, Message: msg}
		}
	}
	return nil
}

// fromSentinel is the part of err from the sentinel on ("invalid transition: cannot ship an order
// that is pending"), without the operation names wrapped around it for the logs.
func fromSentinel(err, sentinel error) string {
	s := err.Error()
	if i := strings.Index(s, sentinel.Error()); i > 0 {
		return s[i:]
	}
	return s
}

func invalid(code, format string, args ...any) error {
	return httpx.Errorf(http.StatusUnprocessableEntity, code, format, args...)
}

func notFound(id string) error {
	return httpx.Errorf(http.StatusNotFound, "order_not_found", "no order %q", id)
}

// encodeError is httpx's error encoder — the contract's JSON body, a 5xx logged — plus the
// Retry-After header (whole seconds) of a rate-limited request, which httpx.Error cannot carry.
func encodeError(log *slog.Logger) kithttp.ErrorEncoder {
	return func(ctx context.Context, err error, w http.ResponseWriter) {
		var he *httpx.Error
		if !errors.As(err, &he) {
			if he = mapError(err); he == nil {
				he = &httpx.Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
			}
		}
		if he.Status >= 500 {
			log.ErrorContext(ctx, "request failed", "err", err)
		}
		var limited *app.RateLimitError
		if errors.As(err, &limited) {
			w.Header().Set("Retry-After", strconv.Itoa(limited.RetryAfterSeconds()))
		}
		httpx.WriteError(w, he)
	}
}
