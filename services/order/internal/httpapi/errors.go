package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/catalog"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// Codes the decoders and endpoints answer with themselves, as well as through errs.
var (
	codeInvalidQuery          = httpx.NewCode(http.StatusBadRequest, "invalid_query")
	codeInvalidPaymentTimeout = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_payment_timeout")
	codeInvalidPaymentWindow  = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_payment_window")
	codeInvalidReason         = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_reason")
	codeInvalidSKU            = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_sku")
	codeInvalidUnitPrice      = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_unit_price")
	codeInvalidCurrency       = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_currency")
	codeOrderNotFound         = httpx.NewCode(http.StatusNotFound, events.OrderNotFound)
)

// errs maps every error a use case returns to its HTTP status and stable code: the one place
// that does. Request-shape errors (malformed_json, body_too_large, unreadable_body) come from
// httpx as *httpx.Error already.
//
// Validation errors keep their whole text: it names the offending line. Errors from the store
// carry its operation names; for a 404 or 409 the client reads the message from the sentinel on.
var errs = httpx.Table{Rules: []httpx.Rule{
	{Err: app.ErrMissingIdempotencyKey, Code: httpx.CodeMissingIdempotencyKey},
	{Err: app.ErrInvalidIdempotencyKey, Code: httpx.CodeInvalidIdempotencyKey},
	{Err: app.ErrIdempotencyConflict, Code: httpx.NewCode(http.StatusConflict, "idempotency_conflict"), Message: httpx.FromSentinel},
	{Err: order.ErrInvalidBuyer, Code: httpx.NewCode(http.StatusUnprocessableEntity, "invalid_buyer_id")},
	{Err: order.ErrInvalidItems, Code: httpx.NewCode(http.StatusUnprocessableEntity, "invalid_items")},
	{Err: order.ErrInvalidSKU, Code: codeInvalidSKU},
	{Err: order.ErrInvalidQty, Code: httpx.NewCode(http.StatusUnprocessableEntity, "invalid_qty")},
	{Err: order.ErrInvalidPrice, Code: codeInvalidUnitPrice},
	{Err: order.ErrDuplicateSKU, Code: httpx.NewCode(http.StatusUnprocessableEntity, "duplicate_sku")},
	{Err: order.ErrTotalOverflow, Code: httpx.NewCode(http.StatusUnprocessableEntity, "total_overflow")},
	{Err: order.ErrInvalidCurrency, Code: codeInvalidCurrency},
	{Err: order.ErrInvalidTimeout, Code: codeInvalidPaymentTimeout},
	{Err: order.ErrInvalidReason, Code: codeInvalidReason},
	{Err: app.ErrRateLimited, Code: httpx.NewCode(http.StatusTooManyRequests, "rate_limited"), Header: retryAfter},
	{Err: app.ErrSoldOut, Code: httpx.NewCode(http.StatusConflict, "sold_out")},
	{Err: app.ErrNotForSale, Code: httpx.NewCode(http.StatusUnprocessableEntity, "sku_not_for_sale")},
	{Err: app.ErrPriceMismatch, Code: httpx.NewCode(http.StatusConflict, "price_mismatch"), Message: httpx.FromSentinel},
	{Err: app.ErrCurrencyMismatch, Code: httpx.NewCode(http.StatusUnprocessableEntity, "currency_mismatch")},
	{Err: app.ErrPaymentTimeoutTooLong, Code: httpx.NewCode(http.StatusUnprocessableEntity, "payment_timeout_too_long")},
	{Err: catalog.ErrInvalidSKU, Code: codeInvalidSKU},
	{Err: catalog.ErrInvalidPrice, Code: codeInvalidUnitPrice},
	{Err: catalog.ErrInvalidCurrency, Code: codeInvalidCurrency},
	{Err: catalog.ErrInvalidWindow, Code: codeInvalidPaymentWindow},
	{Err: catalog.ErrInvalidOperator, Code: httpx.NewCode(http.StatusUnprocessableEntity, "invalid_operator")},
	{Err: catalog.ErrNotFound, Code: httpx.NewCode(http.StatusNotFound, "price_not_found"), Message: httpx.FromSentinel},
	{Err: order.ErrNotFound, Code: codeOrderNotFound, Message: httpx.FromSentinel},
	{Err: order.ErrInvalidTransition, Code: httpx.NewCode(http.StatusConflict, "invalid_transition"), Message: httpx.FromSentinel},
}}

// retryAfter is the Retry-After header (whole seconds) of a rate-limited request.
func retryAfter(err error) http.Header {
	var limited *app.RateLimitError
	if !errors.As(err, &limited) {
		return nil
	}
	return http.Header{"Retry-After": {strconv.Itoa(limited.RetryAfterSeconds())}}
}
