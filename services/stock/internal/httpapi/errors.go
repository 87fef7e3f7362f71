package httpapi

import (
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// codes maps every domain error to its HTTP status and stable code: the one place that does.
var codes = []struct {
	err    error
	status int
	code   string
}{
	{stock.ErrBadQuantity, http.StatusUnprocessableEntity, "invalid_quantity"},
	{stock.ErrBadSKU, http.StatusUnprocessableEntity, "invalid_sku"},
	{stock.ErrBadOrder, http.StatusUnprocessableEntity, "invalid_order"},
	{stock.ErrBadAdjustment, http.StatusUnprocessableEntity, "invalid_adjustment"},
	{stock.ErrBadSlots, http.StatusUnprocessableEntity, "invalid_slots"},
	{stock.ErrUnknownSKU, http.StatusNotFound, "sku_not_found"},
	{stock.ErrNoLock, http.StatusNotFound, "lock_not_found"},
	{stock.ErrAdjustmentNotFound, http.StatusNotFound, "adjustment_not_found"},
	{stock.ErrSKUExists, http.StatusConflict, "sku_exists"},
	{stock.ErrInsufficientStock, http.StatusConflict, "insufficient_stock"},
	{stock.ErrLockNotHeld, http.StatusConflict, "lock_not_held"},
	{stock.ErrIdempotencyReuse, http.StatusConflict, "idempotency_conflict"},
	{stock.ErrAdjustmentDecided, http.StatusConflict, "adjustment_decided"},
	{stock.ErrStocktakeConflict, http.StatusConflict, "stocktake_conflict"},
	{stock.ErrSelfApproval, http.StatusForbidden, "self_approval"},
}

func mapError(err error) *httpx.Error {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return &httpx.Error{Status: c.status, Code: c.code, Message: err.Error()}
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22003" { // numeric_value_out_of_range
		return httpx.Errorf(http.StatusUnprocessableEntity, "quantity_overflow", "the quantities would overflow")
	}
	return nil
}

func badRequest(code, format string, args ...any) error {
	return httpx.Errorf(http.StatusBadRequest, code, format, args...)
}

func invalid(code, format string, args ...any) error {
	return httpx.Errorf(http.StatusUnprocessableEntity, code, format, args...)
}
