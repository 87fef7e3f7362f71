package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// SKUs: POST /v1/skus, GET /v1/skus?prefix=&after=&limit=, GET /v1/skus/{sku},
// PUT /v1/skus/{sku}/slots, POST /v1/skus/{sku}/rebalance.

type skuView struct {
	SKU       string    `json:"sku"`
	OnHand    int64     `json:"on_hand"`
	Available int64     `json:"available"`
	Locked    int64     `json:"locked"`
	Sold      int64     `json:"sold"`
	Incoming  int64     `json:"incoming"`
	Slots     int       `json:"slots"`
	UpdatedAt time.Time `json:"updated_at"`
	status    int
}

func (v skuView) StatusCode() int { return max(v.status, http.StatusOK) }

func viewSKU(s stock.SKUStock) skuView {
	return skuView{SKU: s.SKU, OnHand: s.OnHand, Available: s.Available(), Locked: s.Locked, Sold: s.Sold, Incoming: s.Incoming, Slots: s.Slots, UpdatedAt: s.UpdatedAt}
}

type createSKURequest struct {
	SKU      string `json:"sku"`
	OnHand   int64  `json:"on_hand"`
	operator string
}

func decodeCreateSKU(_ context.Context, r *http.Request) (createSKURequest, error) {
	var req createSKURequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return createSKURequest{}, err
	}
	req.operator = operator(r)
	return req, nil
}

func (e endpoints) createSKU(ctx context.Context, req createSKURequest) (skuView, error) {
	if err := stock.ValidSKU(req.SKU); err != nil {
		return skuView{}, err
	}
	if req.OnHand < 0 || req.OnHand > stock.MaxQty {
		return skuView{}, codeInvalidQuantity.Errorf("on_hand must be between 0 and %d", stock.MaxQty)
	}
	s, err := e.svc.CreateSKU(ctx, req.SKU, req.OnHand, req.operator)
	if err != nil {
		return skuView{}, err
	}
	v := viewSKU(s)
	v.status = http.StatusCreated
	return v, nil
}

func decodeSKUPath(_ context.Context, r *http.Request) (string, error) {
	sku := r.PathValue("sku")
	if err := stock.ValidSKU(sku); err != nil {
		return "", err
	}
	return sku, nil
}

func (e endpoints) getSKU(ctx context.Context, sku string) (skuView, error) {
	s, err := e.svc.GetSKU(ctx, sku)
	if err != nil {
		return skuView{}, err
	}
	return viewSKU(s), nil
}

type listSKUsRequest struct {
	prefix, after string
	limit         int
}

func decodeListSKUs(_ context.Context, r *http.Request) (listSKUsRequest, error) {
	q := r.URL.Query()
	req := listSKUsRequest{prefix: q.Get("prefix"), after: q.Get("after")}
	if req.prefix != "" && stock.ValidSKU(req.prefix) != nil {
		return listSKUsRequest{}, codeInvalidPrefix.Errorf("prefix is the start of a sku: up to 64 of A-Z a-z 0-9 . _ : -, starting with a letter or digit")
	}
	if req.after != "" && stock.ValidSKU(req.after) != nil {
		return listSKUsRequest{}, codeInvalidCursor.Errorf("after must be a sku, as the previous page's next_after")
	}
	var err error
	req.limit, err = decodeLimit(q)
	return req, err
}

type skusResponse struct {
	SKUs      []skuView `json:"skus"`
	NextAfter string    `json:"next_after,omitempty"` // pass as after= for the next page
}

func (e endpoints) listSKUs(ctx context.Context, req listSKUsRequest) (skusResponse, error) {
	skus, err := e.svc.ListSKUs(ctx, req.prefix, req.after, req.limit+1)
	var resp skusResponse
	resp.SKUs, resp.NextAfter = page(skus, req.limit, viewSKU, func(s stock.SKUStock) string { return s.SKU })
	return resp, err
}

// --- slots ---

type slotsRequest struct {
	sku      string
	Slots    int `json:"slots"`
	operator string
}

// slotsResponse is the SKU after a slot change and the rebalance rows it wrote.
type slotsResponse struct {
	skuView
	Rebalanced []ledgerView `json:"rebalanced"`
}

func decodeSlots(_ context.Context, r *http.Request) (slotsRequest, error) {
	req := slotsRequest{sku: r.PathValue("sku"), operator: operator(r)}
	if err := stock.ValidSKU(req.sku); err != nil {
		return slotsRequest{}, err
	}
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return slotsRequest{}, err
	}
	if req.Slots < 1 || req.Slots > stock.MaxSlots {
		return slotsRequest{}, codeInvalidSlots.Errorf("slots must be between 1 and %d, got %d", stock.MaxSlots, req.Slots)
	}
	return req, nil
}

func decodeRebalance(_ context.Context, r *http.Request) (slotsRequest, error) {
	req := slotsRequest{sku: r.PathValue("sku"), operator: operator(r)}
	return req, stock.ValidSKU(req.sku)
}

func (e endpoints) setSlots(ctx context.Context, req slotsRequest) (slotsResponse, error) {
	return viewSlots(e.svc.SetSlots(ctx, req.sku, req.Slots, req.operator))
}

func (e endpoints) rebalance(ctx context.Context, req slotsRequest) (slotsResponse, error) {
	return viewSlots(e.svc.Rebalance(ctx, req.sku, req.operator))
}

func viewSlots(s stock.SKUStock, entries []stock.LedgerEntry, err error) (slotsResponse, error) {
	if err != nil {
		return slotsResponse{}, err
	}
	resp := slotsResponse{skuView: viewSKU(s), Rebalanced: make([]ledgerView, len(entries))}
	for i, e := range entries {
		resp.Rebalanced[i] = viewLedger(e)
	}
	return resp, nil
}
