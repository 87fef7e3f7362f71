package httpapi

import (
	"context"
	"net/http"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Purchases not tied to a purchase order: POST /v1/skus/{sku}/purchases (expected) and
// /receipts (received), each under an Idempotency-Key. Kept for the tools that use them;
// purchase_orders.go records the order and receives it in parts.

// maxKeyLen bounds an Idempotency-Key.
const maxKeyLen = 200

type moveRequest struct {
	Qty      int64  `json:"qty"`
	Remark   string `json:"remark"`
	sku      string
	key      string
	operator string
}

func decodeMove(ctx context.Context, r *http.Request) (moveRequest, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return moveRequest{}, err
	}
	var req moveRequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return moveRequest{}, err
	}
	req.sku, req.operator = sku, operator(r)
	if req.key, err = idempotencyKey(r); err != nil {
		return moveRequest{}, err
	}
	return req, stock.ValidRemark(req.Remark)
}

// idempotencyKey is the request's Idempotency-Key header: missing_idempotency_key without one,
// invalid_idempotency_key past maxKeyLen.
func idempotencyKey(r *http.Request) (string, error) {
	switch key := r.Header.Get("Idempotency-Key"); {
	case key == "":
		return "", httpx.CodeMissingIdempotencyKey.Errorf("header Idempotency-Key (1-%d characters) is required", maxKeyLen)
	case len(key) > maxKeyLen:
		return "", httpx.CodeInvalidIdempotencyKey.Errorf("header Idempotency-Key is longer than %d characters", maxKeyLen)
	default:
		return key, nil
	}
}

type moveFn func(ctx context.Context, sku string, n stock.Qty, key, operator, remark string) (stock.LedgerEntry, bool, error)

// move is the endpoint of a purchase movement: 201 with its ledger row, 200 on a replay.
func move(fn moveFn) func(context.Context, moveRequest) (ledgerView, error) {
	return func(ctx context.Context, req moveRequest) (ledgerView, error) {
		n, err := stock.NewQty(req.Qty)
		if err != nil {
			return ledgerView{}, err
		}
		e, dup, err := fn(ctx, req.sku, n, req.key, req.operator, req.Remark)
		if err != nil {
			return ledgerView{}, err
		}
		v := viewLedger(e)
		if !dup {
			v.status = http.StatusCreated
		}
		return v, nil
	}
}
