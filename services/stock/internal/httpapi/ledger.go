package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// The ledger: GET /v1/skus/{sku}/ledger?after=&limit=&type=&order_id=&operator=&since=&until=,
// and the view of a ledger row every movement answers with.

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
	sku string
	app.LedgerQuery
}

// decodeLedger reads the page (after=, limit=) and the filters: type= (a change type; several
// as type=a&type=b or type=a,b), order_id=, operator=, since= and until= (RFC 3339: rows
// created in [since, until)). An empty parameter is no filter.
func decodeLedger(ctx context.Context, r *http.Request) (ledgerRequest, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return ledgerRequest{}, err
	}
	req := ledgerRequest{sku: sku}
	q := r.URL.Query()
	if req.After, err = decodeIDCursor(q, "after"); err != nil {
		return ledgerRequest{}, err
	}
	if req.Limit, err = decodeLimit(q); err != nil {
		return ledgerRequest{}, err
	}
	for _, v := range q["type"] {
		for t := range strings.SplitSeq(v, ",") {
			if t == "" {
				continue
			}
			ct, err := stock.ParseChangeType(t)
			if err != nil {
				return ledgerRequest{}, codeInvalidChangeType.Errorf("type %q is not a change type; one of %v", t, stock.ChangeTypes)
			}
			req.Types = append(req.Types, ct)
		}
	}
	req.OrderID, req.Operator = q.Get("order_id"), q.Get("operator")
	for _, v := range []string{req.OrderID, req.Operator} {
		if len(v) > 200 || !stock.ValidText(v) {
			return ledgerRequest{}, codeInvalidQuery.Errorf("order_id and operator are at most 200 bytes of UTF-8, with no NUL")
		}
	}
	for _, b := range []struct {
		name string
		dst  *time.Time
	}{{"since", &req.Since}, {"until", &req.Until}} {
		if v := q.Get(b.name); v != "" {
			if *b.dst, err = time.Parse(time.RFC3339, v); err != nil {
				return ledgerRequest{}, codeInvalidTime.Errorf("%s must be an RFC 3339 time like 2026-01-02T15:04:05Z", b.name)
			}
		}
	}
	if !req.Since.IsZero() && !req.Until.IsZero() && !req.Until.After(req.Since) {
		return ledgerRequest{}, codeInvalidTime.Errorf("until must be after since: rows are picked in [since, until)")
	}
	return req, nil
}

type ledgerResponse struct {
	Entries   []ledgerView `json:"entries"`
	NextAfter int64        `json:"next_after,omitempty"` // pass as after= for the next page
}

func (e endpoints) ledger(ctx context.Context, req ledgerRequest) (ledgerResponse, error) {
	limit := req.Limit
	req.Limit++
	entries, err := e.svc.Ledger(ctx, req.sku, req.LedgerQuery)
	var resp ledgerResponse
	resp.Entries, resp.NextAfter = page(entries, limit, viewLedger, func(e stock.LedgerEntry) int64 { return e.ID })
	return resp, err
}
