package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Order locks, internal (service tokens: ops and tests; the event consumers are the main
// path): POST /v1/internal/locks, GET /v1/internal/orders/{id} and /locks, POST
// /v1/internal/orders/{id}/sell, /ship, /refund and /release.

type lineJSON struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

type lockRequest struct {
	OrderID        string     `json:"order_id"`
	Items          []lineJSON `json:"items"`
	PaymentTimeout string     `json:"payment_timeout"`
	operator       string
}

func decodeLock(_ context.Context, r *http.Request) (lockRequest, error) {
	var req lockRequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return lockRequest{}, err
	}
	req.operator = operator(r)
	return req, nil
}

// validOrderID bounds an order id like a SKU id (they appear in ledger rows and URLs).
func validOrderID(id string) error {
	if id == "" || len(id) > 64 || !stock.ValidText(id) {
		return codeInvalidOrderID.Errorf("order_id must be 1-64 bytes of UTF-8, with no NUL")
	}
	return nil
}

type lockResponse struct {
	OrderID   string     `json:"order_id"`
	Status    string     `json:"status"` // locked
	Items     []lineJSON `json:"items"`
	ExpiresAt time.Time  `json:"expires_at"`
	Duplicate bool       `json:"duplicate"`
}

func (r lockResponse) StatusCode() int {
	if r.Duplicate {
		return http.StatusOK
	}
	return http.StatusCreated
}

func (e endpoints) lockOrder(ctx context.Context, req lockRequest) (lockResponse, error) {
	if err := validOrderID(req.OrderID); err != nil {
		return lockResponse{}, err
	}
	timeout := 30 * time.Minute
	if req.PaymentTimeout != "" {
		d, err := time.ParseDuration(req.PaymentTimeout)
		if err != nil || d < time.Second || d > 24*time.Hour {
			return lockResponse{}, codeInvalidPaymentTimeout.Errorf("payment_timeout must be a duration between 1s and 24h, like \"30m\"")
		}
		timeout = d
	}
	lines := make([]events.Line, len(req.Items))
	for i, it := range req.Items {
		lines[i] = events.Line{SKU: it.SKU, Qty: it.Qty}
	}
	res, err := e.svc.LockForOrder(ctx, nil, req.OrderID, lines, time.Now().Add(timeout), req.operator)
	if err != nil {
		return lockResponse{}, err
	}
	if !res.Locked {
		code := codeInsufficientStock
		if res.Reason == stock.RejectUnknownSKU {
			code = codeSKUNotFound
		}
		return lockResponse{}, code.Errorf("order %s rejected: %s (sku %s)", res.OrderID, res.Reason, res.SKU)
	}
	resp := lockResponse{OrderID: res.OrderID, Status: "locked", ExpiresAt: res.Deadline, Duplicate: res.Duplicate}
	for _, l := range res.Lines {
		resp.Items = append(resp.Items, lineJSON{SKU: l.SKU, Qty: l.Qty.Int64()})
	}
	return resp, nil
}

type orderRequest struct {
	orderID   string
	operator  string
	reason    string
	paymentID string
}

func decodeOrderPath(_ context.Context, r *http.Request) (orderRequest, error) {
	id := r.PathValue("id")
	if err := validOrderID(id); err != nil {
		return orderRequest{}, err
	}
	return orderRequest{orderID: id, operator: operator(r)}, nil
}

func decodeRelease(ctx context.Context, r *http.Request) (orderRequest, error) {
	req, err := decodeOrderPath(ctx, r)
	if err != nil {
		return orderRequest{}, err
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return orderRequest{}, err
	}
	req.reason = body.Reason
	return req, nil
}

// decodeSell reads an optional {"payment_id"}: ops may sell by hand, under a payment id.
func decodeSell(ctx context.Context, r *http.Request) (orderRequest, error) {
	req, err := decodeOrderPath(ctx, r)
	if err != nil {
		return orderRequest{}, err
	}
	req.paymentID = "manual:" + req.operator
	body, err := httpx.ReadBody(r)
	if err != nil || len(body) == 0 {
		return req, err
	}
	var in struct {
		PaymentID string `json:"payment_id"`
	}
	if err := httpx.UnmarshalStrict(body, &in); err != nil {
		return orderRequest{}, err
	}
	if !stock.ValidText(in.PaymentID) {
		return orderRequest{}, codeInvalidPaymentID.Errorf("payment_id must be UTF-8 with no NUL")
	}
	if in.PaymentID != "" {
		req.paymentID = in.PaymentID
	}
	return req, nil
}

func (e endpoints) sellOrder(ctx context.Context, req orderRequest) (resolutionView, error) {
	res, err := e.svc.SellLocked(ctx, nil, req.orderID, req.paymentID, req.operator)
	if err != nil {
		return resolutionView{}, err
	}
	if res.Failed != "" {
		// The code is the reason stock.sell_failed carries (app.SellFailed…).
		return resolutionView{}, httpx.NewCode(http.StatusConflict, res.Failed).Errorf("order %s cannot be sold: %s (stock.sell_failed emitted)", req.orderID, res.Failed)
	}
	return viewResolution(res), nil
}

func viewLock(l *stock.Lock) events.StockOrderLock {
	return events.StockOrderLock{SKU: l.SKU(), Qty: l.Qty().Int64(), State: string(l.State()), Deadline: l.Deadline()}
}

type orderLocksResponse struct {
	OrderID string                  `json:"order_id"`
	Locks   []events.StockOrderLock `json:"locks"`
}

func (e endpoints) orderLocks(ctx context.Context, req orderRequest) (orderLocksResponse, error) {
	locks, err := e.svc.Locks(ctx, req.orderID)
	if err != nil {
		return orderLocksResponse{}, err
	}
	if len(locks) == 0 {
		return orderLocksResponse{}, stock.ErrNoLock
	}
	out := orderLocksResponse{OrderID: req.orderID}
	for _, l := range locks {
		out.Locks = append(out.Locks, viewLock(l))
	}
	return out, nil
}

// orderOutcome is what stock knows of an order — its lock outcome, the payment that sold it
// and its locks — for the other services' reconciliation jobs (paid but not sold, stuck
// orders). 404 order_not_found when stock never saw the order.
func (e endpoints) orderOutcome(ctx context.Context, req orderRequest) (events.StockOrder, error) {
	o, err := e.svc.OrderOutcome(ctx, req.orderID)
	if errors.Is(err, stock.ErrOrderUnknown) {
		return events.StockOrder{}, codeOrderNotFound.Errorf("stock has no record of order %s", req.orderID)
	}
	if err != nil {
		return events.StockOrder{}, err
	}
	out := events.StockOrder{OrderID: o.OrderID, Outcome: o.Outcome, RejectReason: o.RejectReason, RejectSKU: o.RejectSKU, PaidBy: o.PaidBy,
		Deadline: o.Deadline, Locks: []events.StockOrderLock{},
		ReleasedBy: map[stock.ChangeType]string{stock.ChangeReleaseTimeout: events.ReleaseTimeout, stock.ChangeReleaseCancel: events.ReleaseCancel}[o.ReleasedBy]}
	for _, l := range o.Locks {
		out.Locks = append(out.Locks, viewLock(l))
	}
	return out, nil
}

type resolutionView struct {
	OrderID  string `json:"order_id"`
	Applied  bool   `json:"applied"`
	State    string `json:"state"`
	Relocked bool   `json:"relocked,omitempty"`
	NoOp     string `json:"noop,omitempty"`
}

func viewResolution(r app.Resolution) resolutionView {
	return resolutionView{OrderID: r.OrderID, Applied: r.Applied, State: r.State, Relocked: r.Relocked, NoOp: r.NoOp}
}

// viewedResolution is the view of a use case's resolution, or its error.
func viewedResolution(r app.Resolution, err error) (resolutionView, error) {
	if err != nil {
		return resolutionView{}, err
	}
	return viewResolution(r), nil
}

// resolve is the endpoint of a use case that resolves an order's locks (ship, refund).
func resolve(fn func(ctx context.Context, in *inbox.Message, orderID, operator string) (app.Resolution, error)) func(context.Context, orderRequest) (resolutionView, error) {
	return func(ctx context.Context, req orderRequest) (resolutionView, error) {
		return viewedResolution(fn(ctx, nil, req.orderID, req.operator))
	}
}

func (e endpoints) releaseOrder(ctx context.Context, req orderRequest) (resolutionView, error) {
	reason := map[string]stock.ChangeType{"timeout": stock.ChangeReleaseTimeout, "cancel": stock.ChangeReleaseCancel}[req.reason]
	if reason == "" {
		return resolutionView{}, codeInvalidReason.Errorf("reason must be timeout or cancel")
	}
	return viewedResolution(e.svc.ReleaseLock(ctx, nil, req.orderID, reason, req.operator))
}
