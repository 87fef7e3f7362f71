package httpapi

import (
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Codes the decoders and endpoints answer with themselves, as well as through errs.
var (
	codeInvalidCursor         = httpx.NewCode(http.StatusBadRequest, "invalid_cursor")
	codeInvalidLimit          = httpx.NewCode(http.StatusBadRequest, "invalid_limit")
	codeInvalidPrefix         = httpx.NewCode(http.StatusBadRequest, "invalid_prefix")
	codeInvalidStatus         = httpx.NewCode(http.StatusBadRequest, "invalid_status")
	codeInvalidChangeType     = httpx.NewCode(http.StatusBadRequest, "invalid_change_type")
	codeInvalidTime           = httpx.NewCode(http.StatusBadRequest, "invalid_time")
	codeInvalidGrace          = httpx.NewCode(http.StatusBadRequest, "invalid_grace")
	codeInvalidQuery          = httpx.NewCode(http.StatusBadRequest, "invalid_query")
	codeMissingSKU            = httpx.NewCode(http.StatusBadRequest, "missing_sku")
	codeTooManySKUs           = httpx.NewCode(http.StatusBadRequest, "too_many_skus")
	codeInvalidSKUQuery       = httpx.NewCode(http.StatusBadRequest, "invalid_sku_query") // a query's sku; a body's or path's is 422 invalid_sku
	codeInvalidQuantity       = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_quantity")
	codeInvalidSlots          = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_slots")
	codeInvalidOrderID        = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_order_id")
	codeInvalidPaymentTimeout = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_payment_timeout")
	codeInvalidPaymentID      = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_payment_id")
	codeInvalidReason         = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_reason")
	codeSKUNotFound           = httpx.NewCode(http.StatusNotFound, "sku_not_found")
	codeOrderNotFound         = httpx.NewCode(http.StatusNotFound, events.OrderNotFound)
	codeInsufficientStock     = httpx.NewCode(http.StatusConflict, "insufficient_stock")
)

// errs maps every domain error to its HTTP status and stable code: the one place that does.
// Request-shape errors (malformed_json, body_too_large, unreadable_body) come from httpx as
// *httpx.Error already.
var errs = httpx.Table{Rules: []httpx.Rule{
	{Err: stock.ErrBadQuantity, Code: codeInvalidQuantity},
	{Err: stock.ErrBadSKU, Code: httpx.NewCode(http.StatusUnprocessableEntity, "invalid_sku")},
	{Err: stock.ErrBadOrder, Code: httpx.NewCode(http.StatusUnprocessableEntity, "invalid_order")},
	{Err: stock.ErrBadAdjustment, Code: httpx.NewCode(http.StatusUnprocessableEntity, "invalid_adjustment")},
	{Err: stock.ErrBadSlots, Code: codeInvalidSlots},
	{Err: stock.ErrBadRemark, Code: httpx.NewCode(http.StatusUnprocessableEntity, "invalid_remark")},
	{Err: stock.ErrUnknownSKU, Code: codeSKUNotFound},
	{Err: stock.ErrNoLock, Code: httpx.NewCode(http.StatusNotFound, "lock_not_found")},
	{Err: stock.ErrAdjustmentNotFound, Code: httpx.NewCode(http.StatusNotFound, "adjustment_not_found")},
	{Err: stock.ErrPurchaseOrderNotFound, Code: httpx.NewCode(http.StatusNotFound, "purchase_order_not_found")},
	{Err: stock.ErrSKUExists, Code: httpx.NewCode(http.StatusConflict, "sku_exists")},
	{Err: stock.ErrInsufficientStock, Code: codeInsufficientStock},
	{Err: stock.ErrLockNotHeld, Code: httpx.NewCode(http.StatusConflict, "lock_not_held")},
	{Err: stock.ErrNotYetDue, Code: httpx.NewCode(http.StatusConflict, "lock_not_yet_due")},
	{Err: stock.ErrIdempotencyReuse, Code: httpx.NewCode(http.StatusConflict, "idempotency_conflict")},
	{Err: stock.ErrAdjustmentDecided, Code: httpx.NewCode(http.StatusConflict, "adjustment_decided")},
	{Err: stock.ErrStocktakeConflict, Code: httpx.NewCode(http.StatusConflict, "stocktake_conflict")},
	{Err: stock.ErrOverReceipt, Code: httpx.NewCode(http.StatusConflict, "over_receipt")},
	{Err: stock.ErrPurchaseOrderNotOpen, Code: httpx.NewCode(http.StatusConflict, "purchase_order_not_open")},
	{Err: stock.ErrSelfApproval, Code: httpx.NewCode(http.StatusForbidden, "self_approval")},
	{Err: app.ErrGateUnavailable, Code: httpx.NewCode(http.StatusServiceUnavailable, "gate_unavailable")},
	{Err: app.ErrAvailabilityNotReady, Code: httpx.NewCode(http.StatusServiceUnavailable, "availability_not_ready"),
		Header: func(error) http.Header { return http.Header{"Retry-After": {"1"}} }},
	{Match: numericOverflow, Code: httpx.NewCode(http.StatusUnprocessableEntity, "quantity_overflow"), Message: httpx.Text("the quantities would overflow")},
}}

// numericOverflow is PostgreSQL's numeric_value_out_of_range: a sum past the columns' range.
func numericOverflow(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22003"
}
