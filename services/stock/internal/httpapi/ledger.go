package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// The ledger: GET /v1/skus/{sku}/ledger, and the view of a ledger row every movement answers with.

type figures struct {
	OnHand    int64 `json:"on_hand"`
	Available int64 `json:"available"`
	Locked    int64 `json:"locked"`
	Sold      int64 `json:"sold"`
	Incoming  int64 `json:"incoming"`
}

func viewFigures(q stock.Quantities) figures {
	return figures{OnHand: q.OnHand, Available: q.Available(), Locked: q.Locked, Sold: q.Sold, Incoming: q.Incoming}
}

type ledgerView struct {
	ID         int64     `json:"id"`
	SKU        string    `json:"sku"`
	Slot       int       `json:"slot"`
	ChangeType string    `json:"change_type"`
	Qty        int64     `json:"qty"`
	Before     figures   `json:"before"`
	After      figures   `json:"after"`
	OrderID    string    `json:"order_id,omitempty"`
	Operator   string    `json:"operator"`
	Remark     string    `json:"remark"`
	CreatedAt  time.Time `json:"created_at"`
	status     int
}

func (v ledgerView) StatusCode() int { return max(v.status, http.StatusOK) }

func viewLedger(e stock.LedgerEntry) ledgerView {
	return ledgerView{ID: e.ID, SKU: e.SKU, Slot: e.Slot, ChangeType: string(e.Type), Qty: e.Qty, Before: viewFigures(e.Before), After: viewFigures(e.After),
		OrderID: e.OrderID, Operator: e.Operator, Remark: e.Remark, CreatedAt: e.CreatedAt}
}

type ledgerRequest struct {
	sku   string
	after int64
	limit int
}

func decodeLedger(ctx context.Context, r *http.Request) (ledgerRequest, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return ledgerRequest{}, err
	}
	req := ledgerRequest{sku: sku, limit: 100}
	q := r.URL.Query()
	if v := q.Get("after"); v != "" {
		if req.after, err = strconv.ParseInt(v, 10, 64); err != nil || req.after < 0 {
			return ledgerRequest{}, codeInvalidCursor.Errorf("after must be a non-negative ledger id")
		}
	}
	if v := q.Get("limit"); v != "" {
		if req.limit, err = strconv.Atoi(v); err != nil || req.limit < 1 || req.limit > 1000 {
			return ledgerRequest{}, codeInvalidLimit.Errorf("limit must be between 1 and 1000")
		}
	}
	return req, nil
}

type ledgerResponse struct {
	Entries   []ledgerView `json:"entries"`
	NextAfter int64        `json:"next_after,omitempty"` // pass as after= for the next page
}

func (e endpoints) ledger(ctx context.Context, req ledgerRequest) (ledgerResponse, error) {
	entries, err := e.svc.Ledger(ctx, req.sku, req.after, req.limit)
	if err != nil {
		return ledgerResponse{}, err
	}
	resp := ledgerResponse{Entries: make([]ledgerView, len(entries))}
	for i, e := range entries {
		resp.Entries[i] = viewLedger(e)
	}
	if len(entries) == req.limit {
		resp.NextAfter = entries[len(entries)-1].ID
	}
	return resp, nil
}
