package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Adjustments (four eyes): POST /v1/skus/{sku}/adjustments, GET /v1/adjustments/{id},
// GET /v1/adjustments?status=&sku=&before=&limit=, POST /v1/adjustments/{id}/approve and /reject.

type adjustmentRequest struct {
	Kind     string `json:"kind"`
	Delta    *int64 `json:"delta"`
	Counted  *int64 `json:"counted"`
	Reason   string `json:"reason"`
	sku      string
	operator string
}

func decodeAdjustment(ctx context.Context, r *http.Request) (adjustmentRequest, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return adjustmentRequest{}, err
	}
	var req adjustmentRequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return adjustmentRequest{}, err
	}
	req.sku, req.operator = sku, operator(r)
	return req, nil
}

type adjustmentView struct {
	ID          int64  `json:"id"`
	SKU         string `json:"sku"`
	Kind        string `json:"kind"`
	Delta       *int64 `json:"delta,omitempty"`
	Counted     *int64 `json:"counted,omitempty"`
	Reason      string `json:"reason"`
	RequestedBy string `json:"requested_by"`
	State       string `json:"state"`
	DecidedBy   string `json:"decided_by,omitempty"`
	LedgerID    *int64 `json:"ledger_id,omitempty"`
	status      int
}

func (v adjustmentView) StatusCode() int { return max(v.status, http.StatusOK) }

func viewAdjustment(a stock.Adjustment) adjustmentView {
	return adjustmentView{ID: a.ID, SKU: a.SKU, Kind: string(a.Kind), Delta: a.Delta, Counted: a.Counted, Reason: a.Reason,
		RequestedBy: a.RequestedBy, State: string(a.State), DecidedBy: a.DecidedBy, LedgerID: a.LedgerID}
}

// viewedAdjustment is the view of a use case's adjustment, or its error.
func viewedAdjustment(a stock.Adjustment, err error) (adjustmentView, error) {
	if err != nil {
		return adjustmentView{}, err
	}
	return viewAdjustment(a), nil
}

func (e endpoints) requestAdjustment(ctx context.Context, req adjustmentRequest) (adjustmentView, error) {
	a, err := stock.NewAdjustment(req.sku, stock.ChangeType(req.Kind), req.Delta, req.Counted, req.Reason, req.operator)
	if err != nil {
		return adjustmentView{}, err
	}
	if a, err = e.svc.RequestAdjustment(ctx, a); err != nil {
		return adjustmentView{}, err
	}
	v := viewAdjustment(a)
	v.status = http.StatusCreated
	return v, nil
}

type adjustmentIDRequest struct {
	id       int64
	operator string
}

func decodeAdjustmentID(_ context.Context, r *http.Request) (adjustmentIDRequest, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return adjustmentIDRequest{}, stock.ErrAdjustmentNotFound
	}
	return adjustmentIDRequest{id: id, operator: operator(r)}, nil
}

func (e endpoints) getAdjustment(ctx context.Context, req adjustmentIDRequest) (adjustmentView, error) {
	return viewedAdjustment(e.svc.GetAdjustment(ctx, req.id))
}

// decideAdjustment is the endpoint that approves (or rejects) an adjustment.
func (e endpoints) decideAdjustment(approve bool) func(context.Context, adjustmentIDRequest) (adjustmentView, error) {
	return func(ctx context.Context, req adjustmentIDRequest) (adjustmentView, error) {
		return viewedAdjustment(e.svc.DecideAdjustment(ctx, req.id, approve, req.operator))
	}
}

// decodeListAdjustments reads status= (an adjustment state), sku=, before= and limit=; an empty
// parameter is no filter.
func decodeListAdjustments(_ context.Context, r *http.Request) (app.AdjustmentQuery, error) {
	q := r.URL.Query()
	var req app.AdjustmentQuery
	var err error
	if v := q.Get("status"); v != "" {
		if req.State, err = stock.ParseAdjustmentState(v); err != nil {
			return req, codeInvalidStatus.Errorf("status must be one of %v", stock.AdjustmentStates)
		}
	}
	if req.SKU = q.Get("sku"); req.SKU != "" {
		if err := stock.ValidSKU(req.SKU); err != nil {
			return req, codeInvalidSKUQuery.Errorf("%v", err)
		}
	}
	if req.Before, err = decodeIDCursor(q, "before"); err != nil {
		return req, err
	}
	req.Limit, err = decodeLimit(q)
	return req, err
}

type adjustmentsResponse struct {
	Adjustments []adjustmentView `json:"adjustments"`
	NextBefore  int64            `json:"next_before,omitempty"` // pass as before= for the next page
}

func (e endpoints) listAdjustments(ctx context.Context, req app.AdjustmentQuery) (adjustmentsResponse, error) {
	limit := req.Limit
	req.Limit++
	as, err := e.svc.Adjustments(ctx, req)
	var resp adjustmentsResponse
	resp.Adjustments, resp.NextBefore = page(as, limit, viewAdjustment, func(a stock.Adjustment) int64 { return a.ID })
	return resp, err
}
