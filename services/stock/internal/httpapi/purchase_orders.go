package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Purchase orders: POST /v1/skus/{sku}/purchase-orders, GET /v1/skus/{sku}/purchase-orders,
// GET /v1/purchase-orders/{id}, POST /v1/purchase-orders/{id}/receipts and /close. Placing
// and receiving take an Idempotency-Key (201 first, 200 with the order as it is now on a
// replay, nothing moved); closing needs none: an order closes once, and closing it again
// answers 200 with it as it is.

type purchaseOrderView struct {
	ID        int64         `json:"id"`
	SKU       string        `json:"sku"`
	Expected  int64         `json:"expected"`
	Received  int64         `json:"received"`
	Status    string        `json:"status"`
	Remark    string        `json:"remark"`
	CreatedBy string        `json:"created_by"`
	CreatedAt time.Time     `json:"created_at"`
	ClosedBy  string        `json:"closed_by,omitempty"`
	ClosedAt  *time.Time    `json:"closed_at,omitempty"`
	Receipts  []receiptView `json:"receipts"`
	status    int
}

type receiptView struct {
	LedgerID int64     `json:"ledger_id"`
	Quantity int64     `json:"quantity"`
	Operator string    `json:"operator"`
	Remark   string    `json:"remark"`
	At       time.Time `json:"at"`
}

func (v purchaseOrderView) StatusCode() int { return max(v.status, http.StatusOK) }

func viewPurchaseOrder(p stock.PurchaseOrder) purchaseOrderView {
	v := purchaseOrderView{ID: p.ID, SKU: p.SKU, Expected: p.Expected, Received: p.Received, Status: string(p.Status()), Remark: p.Remark,
		CreatedBy: p.CreatedBy, CreatedAt: p.CreatedAt, ClosedBy: p.ClosedBy, ClosedAt: p.ClosedAt, Receipts: make([]receiptView, len(p.Receipts))}
	for i, r := range p.Receipts {
		v.Receipts[i] = receiptView{LedgerID: r.LedgerID, Quantity: r.Qty, Operator: r.Operator, Remark: r.Remark, At: r.At}
	}
	return v
}

// viewedPurchaseOrder is the view of a use case's order: 201 when it changed stock, 200 for a
// replay (dup), or its error.
func viewedPurchaseOrder(p stock.PurchaseOrder, dup bool, err error) (purchaseOrderView, error) {
	if err != nil {
		return purchaseOrderView{}, err
	}
	v := viewPurchaseOrder(p)
	if !dup {
		v.status = http.StatusCreated
	}
	return v, nil
}

// purchaseOrderRequest is the body of placing an order and of a receipt, with the path's SKU
// or order id and the header's key.
type purchaseOrderRequest struct {
	Quantity int64  `json:"quantity"`
	Remark   string `json:"remark"`
	sku      string
	id       int64
	key      string
	operator string
}

func decodePlacePurchaseOrder(ctx context.Context, r *http.Request) (purchaseOrderRequest, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return purchaseOrderRequest{}, err
	}
	req, err := decodeQuantityBody(r)
	req.sku = sku
	return req, err
}

func decodeReceivePurchaseOrder(ctx context.Context, r *http.Request) (purchaseOrderRequest, error) {
	id, err := decodePurchaseOrderID(ctx, r)
	if err != nil {
		return purchaseOrderRequest{}, err
	}
	req, err := decodeQuantityBody(r)
	req.id = id
	return req, err
}

// decodeQuantityBody reads {"quantity", "remark"} under a required Idempotency-Key.
func decodeQuantityBody(r *http.Request) (purchaseOrderRequest, error) {
	var req purchaseOrderRequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return purchaseOrderRequest{}, err
	}
	var err error
	if req.key, err = idempotencyKey(r); err != nil {
		return purchaseOrderRequest{}, err
	}
	req.operator = operator(r)
	return req, stock.ValidRemark(req.Remark)
}

func (e endpoints) placePurchaseOrder(ctx context.Context, req purchaseOrderRequest) (purchaseOrderView, error) {
	n, err := stock.NewQty(req.Quantity)
	if err != nil {
		return purchaseOrderView{}, err
	}
	p, err := stock.NewPurchaseOrder(req.sku, n, req.Remark, req.operator)
	if err != nil {
		return purchaseOrderView{}, err
	}
	return viewedPurchaseOrder(e.svc.PlacePurchaseOrder(ctx, p, req.key))
}

func (e endpoints) receivePurchaseOrder(ctx context.Context, req purchaseOrderRequest) (purchaseOrderView, error) {
	n, err := stock.NewQty(req.Quantity)
	if err != nil {
		return purchaseOrderView{}, err
	}
	return viewedPurchaseOrder(e.svc.ReceivePurchaseOrder(ctx, req.id, n, req.key, req.operator, req.Remark))
}

func decodePurchaseOrderID(_ context.Context, r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, stock.ErrPurchaseOrderNotFound
	}
	return id, nil
}

func (e endpoints) getPurchaseOrder(ctx context.Context, id int64) (purchaseOrderView, error) {
	p, err := e.svc.GetPurchaseOrder(ctx, id)
	return viewedPurchaseOrder(p, true, err)
}

// closePurchaseOrder answers 200 whether it closed the order now or it was closed before.
func (e endpoints) closePurchaseOrder(ctx context.Context, r closeRequest) (purchaseOrderView, error) {
	p, _, err := e.svc.ClosePurchaseOrder(ctx, r.id, r.operator)
	return viewedPurchaseOrder(p, true, err)
}

type closeRequest struct {
	id       int64
	operator string
}

func decodeClosePurchaseOrder(ctx context.Context, r *http.Request) (closeRequest, error) {
	id, err := decodePurchaseOrderID(ctx, r)
	return closeRequest{id: id, operator: operator(r)}, err
}

type skuPageRequest struct {
	sku    string
	before int64
	limit  int
}

func decodeListPurchaseOrders(ctx context.Context, r *http.Request) (skuPageRequest, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return skuPageRequest{}, err
	}
	req := skuPageRequest{sku: sku}
	q := r.URL.Query()
	if req.before, err = decodeIDCursor(q, "before"); err != nil {
		return skuPageRequest{}, err
	}
	req.limit, err = decodeLimit(q)
	return req, err
}

type purchaseOrdersResponse struct {
	PurchaseOrders []purchaseOrderView `json:"purchase_orders"`
	NextBefore     int64               `json:"next_before,omitempty"` // pass as before= for the next page
}

func (e endpoints) listPurchaseOrders(ctx context.Context, req skuPageRequest) (purchaseOrdersResponse, error) {
	pos, err := e.svc.PurchaseOrders(ctx, req.sku, req.before, req.limit+1)
	var resp purchaseOrdersResponse
	resp.PurchaseOrders, resp.NextBefore = page(pos, req.limit, viewPurchaseOrder, func(p stock.PurchaseOrder) int64 { return p.ID })
	return resp, err
}
