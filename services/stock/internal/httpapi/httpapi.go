// Package httpapi is the stock service's HTTP transport: go-kit endpoints over the use cases,
// strict JSON decoding, and one error mapping (errors.go). One file per resource: skus.go
// (SKUs and their slots), ledger.go, purchases.go (receipts not tied to a purchase order),
// purchase_orders.go, adjustments.go, orders.go (the internal lock, sell, ship, refund and
// release routes the other services call) and admin.go. Lists page as paging.go says.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/app"
)

// Handler returns the stock HTTP API on mux-style routes; ready backs /readyz. Every route but
// health and the storefront's GET /v1/availability (public, availability.go) names the roles
// that may call it (pkg/auth); the token's subject is the operator of whatever it changes.
func Handler(svc *app.Service, log *slog.Logger, ready func(context.Context) error, v *auth.Verifier, with ...Option) http.Handler {
	mux := http.NewServeMux()
	t := httpx.Transport{Log: log, Errors: errs}
	e := endpoints{svc}
	var p parts
	for _, opt := range with {
		opt(&p)
	}
	var (
		readers  = auth.Readers
		ops      = []auth.Role{auth.Operator, auth.Admin}
		approver = []auth.Role{auth.Approver}
		admin    = []auth.Role{auth.Admin}
		service  = []auth.Role{auth.Service}
	)
	mux.Handle("POST /v1/skus", v.Require(httpx.Server(t, decodeCreateSKU, e.createSKU), ops...))
	mux.Handle("GET /v1/skus", v.Require(httpx.Server(t, decodeListSKUs, e.listSKUs), readers...))
	mux.Handle("GET /v1/skus/{sku}", v.Require(httpx.Server(t, decodeSKUPath, e.getSKU), readers...))
	mux.Handle("GET /v1/skus/{sku}/ledger", v.Require(httpx.Server(t, decodeLedger, e.ledger), readers...))
	mux.Handle("POST /v1/skus/{sku}/purchases", v.Require(httpx.Server(t, decodeMove, move(svc.ExpectPurchase)), ops...))
	mux.Handle("POST /v1/skus/{sku}/receipts", v.Require(httpx.Server(t, decodeMove, move(svc.ReceivePurchase)), ops...))
	mux.Handle("POST /v1/skus/{sku}/purchase-orders", v.Require(httpx.Server(t, decodePlacePurchaseOrder, e.placePurchaseOrder), ops...))
	mux.Handle("GET /v1/skus/{sku}/purchase-orders", v.Require(httpx.Server(t, decodeListPurchaseOrders, e.listPurchaseOrders), readers...))
	mux.Handle("GET /v1/purchase-orders/{id}", v.Require(httpx.Server(t, decodePurchaseOrderID, e.getPurchaseOrder), readers...))
	mux.Handle("POST /v1/purchase-orders/{id}/receipts", v.Require(httpx.Server(t, decodeReceivePurchaseOrder, e.receivePurchaseOrder), ops...))
	mux.Handle("POST /v1/purchase-orders/{id}/close", v.Require(httpx.Server(t, decodeClosePurchaseOrder, e.closePurchaseOrder), ops...))
	mux.Handle("PUT /v1/skus/{sku}/slots", v.Require(httpx.Server(t, decodeSlots, e.setSlots), ops...))
	mux.Handle("POST /v1/skus/{sku}/rebalance", v.Require(httpx.Server(t, decodeRebalance, e.rebalance), ops...))
	mux.Handle("POST /v1/skus/{sku}/adjustments", v.Require(httpx.Server(t, decodeAdjustment, e.requestAdjustment), ops...))
	mux.Handle("GET /v1/adjustments", v.Require(httpx.Server(t, decodeListAdjustments, e.listAdjustments), readers...))
	mux.Handle("GET /v1/adjustments/{id}", v.Require(httpx.Server(t, decodeAdjustmentID, e.getAdjustment), readers...))
	mux.Handle("POST /v1/adjustments/{id}/approve", v.Require(httpx.Server(t, decodeAdjustmentID, e.decideAdjustment(true)), approver...))
	mux.Handle("POST /v1/adjustments/{id}/reject", v.Require(httpx.Server(t, decodeAdjustmentID, e.decideAdjustment(false)), approver...))
	mux.Handle("POST /v1/internal/locks", v.Require(httpx.Server(t, decodeLock, e.lockOrder), service...))
	mux.Handle("GET /v1/internal/orders/{id}/locks", v.Require(httpx.Server(t, decodeOrderPath, e.orderLocks), service...))
	mux.Handle("GET /v1/internal/orders/{id}", v.Require(httpx.Server(t, decodeOrderPath, e.orderOutcome), service...))
	mux.Handle("POST /v1/internal/orders/{id}/sell", v.Require(httpx.Server(t, decodeSell, e.sellOrder), service...))
	mux.Handle("POST /v1/internal/orders/{id}/ship", v.Require(httpx.Server(t, decodeOrderPath, resolve(svc.ShipOrder)), service...))
	mux.Handle("POST /v1/internal/orders/{id}/refund", v.Require(httpx.Server(t, decodeOrderPath, resolve(svc.RefundOrder)), service...))
	mux.Handle("POST /v1/internal/orders/{id}/release", v.Require(httpx.Server(t, decodeRelease, e.releaseOrder), service...))
	mux.Handle("GET /v1/availability", availabilityServer(t, p))
	gateRoutes(mux, t, p, func(h http.Handler) http.Handler { return v.Require(h, readers...) },
		func(h http.Handler) http.Handler { return v.Require(h, ops...) })
	mux.Handle("POST /v1/admin/verify", v.Require(httpx.Server(t, httpx.NoRequest, e.verify), ops...))
	mux.Handle("POST /v1/admin/rebuild", v.Require(httpx.Server(t, httpx.NoRequest, e.rebuild), admin...))
	mux.Handle("GET /v1/admin/overdue-locks", v.Require(httpx.Server(t, decodeOverdue, e.overdueLocks), readers...))
	httpx.Health(mux, ready)
	httpx.NotFound(mux)
	return mux
}

// endpoints are the API's use cases, one method per route; the routes of one use case with a
// parameter (move, resolve, decideAdjustment) are made from it.
type endpoints struct{ svc *app.Service }

// operator is who acts: the subject of the request's verified token.
func operator(r *http.Request) string { return auth.Actor(r.Context()) }
