// Package httpapi is the order service's public HTTP API (DESIGN §9): go-kit endpoints over
// the use cases, strict JSON decoding, and one error mapping (errors.go).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/catalog"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// Handler returns the order API:
//
//	POST /v1/orders              place an order (Idempotency-Key header required) → 201, replay → 200
//	GET  /v1/orders/{id}         the order with its history
//	GET  /v1/orders?buyer_id=…   a buyer's orders, newest first (&limit=1..100, default 20;
//	                             &before=<order_id> for the next page, as next_before says)
//	POST /v1/orders/{id}/cancel  ask to cancel an unpaid order → 202 (200 once cancelled)
//	POST /v1/orders/{id}/refund  refund a paid or shipped order → 200
//	POST /v1/orders/{id}/ship    ship a paid order → 200
//	PUT  /v1/prices/{sku}        set a SKU's sales terms → 200
//	GET  /v1/prices/{sku}        a SKU's sales terms → 200; 404 price_not_found: not for sale
//	GET  /healthz, GET /readyz   liveness; readiness is ready() == nil
//
// Cancel and refund take an optional body {"reason": "…"}. A rate-limited POST /v1/orders is
// 429 rate_limited with a Retry-After header.
//
// Who (pkg/auth): a buyer places, reads, lists and cancels their own orders only (the buyer id
// is the token's; another buyer's order is 403); viewers, staff and services read any order;
// operators and admins cancel, refund and ship any order, and set prices; anyone with a token
// reads a price. A POST /v1/orders naming a SKU that sold out moments ago is answered
// 409 sold_out before its token is checked (soldOutFirst).
func Handler(svc *app.Service, log *slog.Logger, ready func(context.Context) error, v *auth.Verifier) http.Handler {
	mux := http.NewServeMux()
	t := httpx.Transport{Log: log, Errors: errs}
	e := endpoints{svc}
	var (
		readers = append([]auth.Role{auth.Buyer}, auth.Readers...)
		cancel  = []auth.Role{auth.Buyer, auth.Operator, auth.Admin}
		ops     = []auth.Role{auth.Operator, auth.Admin}
	)
	mux.Handle("POST /v1/orders", soldOutFirst(svc, v.Require(httpx.Server(t, decodePlaceOrder, e.placeOrder), auth.Buyer)))
	mux.Handle("GET /v1/orders/{id}", v.Require(httpx.Server(t, decodeOrderID, e.getOrder), readers...))
	mux.Handle("GET /v1/orders", v.Require(httpx.Server(t, decodeListOrders, e.listOrders), readers...))
	mux.Handle("POST /v1/orders/{id}/cancel", v.Require(httpx.Server(t, decodeOrderAction, e.cancelOrder), cancel...))
	mux.Handle("POST /v1/orders/{id}/refund", v.Require(httpx.Server(t, decodeOrderAction, e.refundOrder), ops...))
	mux.Handle("POST /v1/orders/{id}/ship", v.Require(httpx.Server(t, decodeOrderAction, e.shipOrder), ops...))
	mux.Handle("PUT /v1/prices/{sku}", v.Require(httpx.Server(t, decodePutPrice, e.putPrice), ops...))
	mux.Handle("GET /v1/prices/{sku}", v.Require(httpx.Server(t, decodeSKU, e.getPrice), auth.Roles...))
	httpx.Health(mux, ready)
	httpx.NotFound(mux)
	return mux
}

// endpoints are the API's use cases, one method per route.
type endpoints struct{ svc *app.Service }

// --- views ---

type itemView struct {
	SKU       string `json:"sku"`
	Qty       int64  `json:"qty"`
	UnitPrice int64  `json:"unit_price"`
}

type historyView struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

type orderView struct {
	OrderID           string        `json:"order_id"`
	BuyerID           string        `json:"buyer_id"`
	Status            string        `json:"status"`
	Items             []itemView    `json:"items"`
	Total             int64         `json:"total"`
	Currency          string        `json:"currency"`
	PaymentTimeout    string        `json:"payment_timeout"`
	CreatedAt         time.Time     `json:"created_at"`
	UpdatedAt         time.Time     `json:"updated_at"`
	ExpiresAt         time.Time     `json:"expires_at"`
	CancelRequestedAt *time.Time    `json:"cancel_requested_at,omitempty"`
	History           []historyView `json:"history"`

	status   int
	replayed bool
}

// StatusCode implements httpx.StatusCoder.
func (v orderView) StatusCode() int { return max(v.status, http.StatusOK) }

// Headers implements httpx.Headerer: a new order gets a Location, a replayed one
// Idempotent-Replayed.
func (v orderView) Headers() http.Header {
	h := http.Header{}
	if v.status == http.StatusCreated {
		h.Set("Location", "/v1/orders/"+v.OrderID)
	}
	if v.replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	return h
}

func viewOrder(o *order.Order) orderView {
	items := o.Items()
	v := orderView{
		OrderID: o.ID(), BuyerID: o.BuyerID(), Status: o.Status().String(),
		Items: make([]itemView, len(items)), Total: o.Total().Int64(), Currency: o.Currency(),
		PaymentTimeout: o.PaymentTimeout().String(),
		CreatedAt:      o.CreatedAt(), UpdatedAt: o.UpdatedAt(), ExpiresAt: o.ExpiresAt(),
	}
	for i, it := range items {
		v.Items[i] = itemView{SKU: it.SKU(), Qty: it.Qty().Int64(), UnitPrice: it.UnitPrice().Int64()}
	}
	if at := o.CancelRequestedAt(); !at.IsZero() {
		v.CancelRequestedAt = &at
	}
	for _, h := range o.History() {
		v.History = append(v.History, historyView{Status: h.Status.String(), At: h.At, Reason: h.Reason})
	}
	return v
}

// --- place ---

type placeOrderBody struct {
	BuyerID        string            `json:"buyer_id"`
	Items          []app.ItemRequest `json:"items"`
	Currency       string            `json:"currency"`
	PaymentTimeout *string           `json:"payment_timeout"`
}

func decodePlaceOrder(ctx context.Context, r *http.Request) (app.PlaceOrderRequest, error) {
	var body placeOrderBody
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return app.PlaceOrderRequest{}, err
	}
	// The buyer is the token's; a body naming another is refused, an empty one is filled in.
	buyer := auth.FromContext(ctx).BuyerID
	if body.BuyerID == "" {
		body.BuyerID = buyer
	} else if body.BuyerID != buyer {
		return app.PlaceOrderRequest{}, auth.Forbidden("buyer_id %q is not the token's buyer", body.BuyerID)
	}
	req := app.PlaceOrderRequest{
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		BuyerID:        body.BuyerID,
		Items:          body.Items,
		Currency:       body.Currency,
	}
	if body.PaymentTimeout != nil {
		d, err := time.ParseDuration(*body.PaymentTimeout)
		if err != nil || d <= 0 {
			return app.PlaceOrderRequest{}, codeInvalidPaymentTimeout.Errorf("payment_timeout %q is not a positive Go duration (\"10m\")", *body.PaymentTimeout)
		}
		req.PaymentTimeout = d
	}
	return req, nil
}

func (e endpoints) placeOrder(ctx context.Context, req app.PlaceOrderRequest) (orderView, error) {
	o, created, err := e.svc.PlaceOrder(ctx, req)
	if err != nil {
		return orderView{}, err
	}
	v := viewOrder(o)
	if created {
		v.status = http.StatusCreated
	} else {
		v.replayed = true
	}
	return v, nil
}

// --- read ---

func decodeOrderID(_ context.Context, r *http.Request) (string, error) {
	id := r.PathValue("id")
	if id == "" || len(id) > 64 {
		return "", codeOrderNotFound.Errorf("no order %q", id)
	}
	return id, nil
}

func (e endpoints) getOrder(ctx context.Context, id string) (orderView, error) {
	o, err := e.svc.Get(ctx, id)
	if err != nil {
		return orderView{}, err
	}
	if err := mayAct(ctx, o, auth.Readers...); err != nil {
		return orderView{}, err
	}
	return viewOrder(o), nil
}

type listRequest struct {
	buyerID, before string
	limit           int
}

func decodeListOrders(ctx context.Context, r *http.Request) (listRequest, error) {
	q := r.URL.Query()
	req := listRequest{buyerID: q.Get("buyer_id"), before: q.Get("before"), limit: 20}
	if c := auth.FromContext(ctx); !c.Has(auth.Readers...) { // a buyer lists their own
		if req.buyerID == "" {
			req.buyerID = c.BuyerID
		} else if req.buyerID != c.BuyerID {
			return listRequest{}, auth.Forbidden("a buyer lists only their own orders")
		}
	}
	if req.buyerID == "" {
		return listRequest{}, codeInvalidQuery.Errorf("buyer_id is required")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > app.MaxListLimit {
			return listRequest{}, codeInvalidQuery.Errorf("limit must be between 1 and %d", app.MaxListLimit)
		}
		req.limit = n
	}
	return req, nil
}

type listResponse struct {
	Orders     []orderView `json:"orders"`
	NextBefore string      `json:"next_before,omitempty"` // pass as before= for the next page
}

func (e endpoints) listOrders(ctx context.Context, req listRequest) (listResponse, error) {
	orders, err := e.svc.ListOrders(ctx, req.buyerID, req.before, req.limit)
	if err != nil {
		return listResponse{}, err
	}
	resp := listResponse{Orders: make([]orderView, len(orders))}
	for i, o := range orders {
		resp.Orders[i] = viewOrder(o)
	}
	if len(orders) == req.limit {
		resp.NextBefore = orders[len(orders)-1].ID()
	}
	return resp, nil
}

// --- requests ---

// mayAct says whether the caller may act on o: a token with one of roles may, a buyer only on
// their own order.
func mayAct(ctx context.Context, o *order.Order, roles ...auth.Role) error {
	c := auth.FromContext(ctx)
	if c.Has(roles...) || (c.Has(auth.Buyer) && c.BuyerID == o.BuyerID()) {
		return nil
	}
	return auth.Forbidden("order %s is another buyer's", o.ID())
}

type actionRequest struct {
	id     string
	reason string
}

type actionBody struct {
	Reason string `json:"reason"`
}

// decodeOrderAction reads the order id and the optional {"reason": "…"} body.
func decodeOrderAction(ctx context.Context, r *http.Request) (actionRequest, error) {
	id, err := decodeOrderID(ctx, r)
	if err != nil {
		return actionRequest{}, err
	}
	raw, err := httpx.ReadBody(r)
	if err != nil {
		return actionRequest{}, err
	}
	var body actionBody
	if len(raw) > 0 {
		if err := httpx.UnmarshalStrict(raw, &body); err != nil {
			return actionRequest{}, err
		}
	}
	return actionRequest{id: id, reason: body.Reason}, nil
}

func (e endpoints) cancelOrder(ctx context.Context, req actionRequest) (orderView, error) {
	if c := auth.FromContext(ctx); !c.Has(auth.Operator, auth.Admin) {
		o, err := e.svc.Get(ctx, req.id) // a buyer cancels only their own; an order's buyer never changes
		if err != nil {
			return orderView{}, err
		}
		if err := mayAct(ctx, o); err != nil {
			return orderView{}, err
		}
	}
	o, err := e.svc.CancelOrder(ctx, req.id, req.reason)
	if err != nil {
		return orderView{}, err
	}
	v := viewOrder(o)
	if o.Status() != order.Cancelled {
		v.status = http.StatusAccepted // stock's release completes it
	}
	return v, nil
}

func (e endpoints) refundOrder(ctx context.Context, req actionRequest) (orderView, error) {
	return viewed(e.svc.RefundOrder(ctx, req.id, req.reason))
}

func (e endpoints) shipOrder(ctx context.Context, req actionRequest) (orderView, error) {
	if req.reason != "" {
		return orderView{}, codeInvalidReason.Errorf("ship takes no reason")
	}
	return viewed(e.svc.ShipOrder(ctx, req.id))
}

// viewed is the view of a use case's order, or its error.
func viewed(o *order.Order, err error) (orderView, error) {
	if err != nil {
		return orderView{}, err
	}
	return viewOrder(o), nil
}

// --- prices ---

// actor is who makes an operator's request: the token's subject.
func actor(r *http.Request) string { return auth.Actor(r.Context()) }

type priceView struct {
	SKU           string    `json:"sku"`
	UnitPrice     int64     `json:"unit_price"`
	Currency      string    `json:"currency"`
	PaymentWindow string    `json:"payment_window,omitempty"` // none: the service's default
	UpdatedAt     time.Time `json:"updated_at"`
	UpdatedBy     string    `json:"updated_by"`
}

func viewPrice(p catalog.Price) priceView {
	v := priceView{SKU: p.SKU(), UnitPrice: p.UnitPrice().Int64(), Currency: p.Currency(),
		UpdatedAt: p.UpdatedAt(), UpdatedBy: p.UpdatedBy()}
	if w := p.PaymentWindow(); w != 0 {
		v.PaymentWindow = w.String()
	}
	return v
}

type priceBody struct {
	UnitPrice     int64   `json:"unit_price"`
	Currency      string  `json:"currency"`
	PaymentWindow *string `json:"payment_window"`
}

type putPriceRequest struct {
	sku       string
	body      priceBody
	window    time.Duration
	updatedBy string
}

func decodeSKU(_ context.Context, r *http.Request) (string, error) {
	return r.PathValue("sku"), nil
}

func decodePutPrice(_ context.Context, r *http.Request) (putPriceRequest, error) {
	req := putPriceRequest{sku: r.PathValue("sku"), updatedBy: actor(r)}
	if err := httpx.DecodeJSON(r, &req.body); err != nil {
		return putPriceRequest{}, err
	}
	if w := req.body.PaymentWindow; w != nil {
		d, err := time.ParseDuration(*w)
		if err != nil || d <= 0 {
			return putPriceRequest{}, codeInvalidPaymentWindow.Errorf("payment_window %q is not a positive Go duration (\"10m\")", *w)
		}
		req.window = d
	}
	return req, nil
}

func (e endpoints) putPrice(ctx context.Context, req putPriceRequest) (priceView, error) {
	return viewedPrice(e.svc.SetPrice(ctx, req.sku, req.body.UnitPrice, req.body.Currency, req.window, req.updatedBy))
}

func (e endpoints) getPrice(ctx context.Context, sku string) (priceView, error) {
	return viewedPrice(e.svc.Price(ctx, sku))
}

// viewedPrice is the view of a use case's price, or its error.
func viewedPrice(p catalog.Price, err error) (priceView, error) {
	if err != nil {
		return priceView{}, err
	}
	return viewPrice(p), nil
}
