// Package httpapi is the stock service's HTTP transport: go-kit endpoints over the use cases,
// strict JSON decoding, and one error mapping (errors.go).
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Handler returns the stock HTTP API on mux-style routes; ready backs /readyz. Every route but
// health names the roles that may call it (pkg/auth); the token's subject is the operator of
// whatever it changes.
func Handler(svc *app.Service, log *slog.Logger, ready func(context.Context) error, v *auth.Verifier) http.Handler {
	mux := http.NewServeMux()
	opts := httpx.ServerOptions(log, mapError)
	route := func(pattern string, roles []auth.Role, ep endpoint.Endpoint, dec kithttp.DecodeRequestFunc) {
		mux.Handle(pattern, v.Require(kithttp.NewServer(ep, dec, httpx.EncodeJSON, opts...), roles...))
	}
	var (
		readers  = auth.Readers
		ops      = []auth.Role{auth.Operator, auth.Admin}
		approver = []auth.Role{auth.Approver}
		admin    = []auth.Role{auth.Admin}
		service  = []auth.Role{auth.Service}
	)
	route("POST /v1/skus", ops, createSKU(svc), decodeCreateSKU)
	route("GET /v1/skus/{sku}", readers, getSKU(svc), decodeSKUPath)
	route("GET /v1/skus/{sku}/ledger", readers, ledger(svc), decodeLedger)
	route("POST /v1/skus/{sku}/purchases", ops, expectPurchase(svc), decodeMove)
	route("POST /v1/skus/{sku}/receipts", ops, receivePurchase(svc), decodeMove)
	route("PUT /v1/skus/{sku}/slots", ops, setSlots(svc), decodeSlots)
	route("POST /v1/skus/{sku}/rebalance", ops, rebalance(svc), decodeRebalance)
	route("POST /v1/skus/{sku}/adjustments", ops, requestAdjustment(svc), decodeAdjustment)
	route("GET /v1/adjustments/{id}", readers, getAdjustment(svc), decodeAdjustmentID)
	route("POST /v1/adjustments/{id}/approve", approver, decideAdjustment(svc, true), decodeAdjustmentID)
	route("POST /v1/adjustments/{id}/reject", approver, decideAdjustment(svc, false), decodeAdjustmentID)
	route("POST /v1/internal/locks", service, lockOrder(svc), decodeLock)
	route("GET /v1/internal/orders/{id}/locks", service, orderLocks(svc), decodeOrderPath)
	route("GET /v1/internal/orders/{id}", service, orderOutcome(svc), decodeOrderPath)
	route("POST /v1/internal/orders/{id}/sell", service, sellOrder(svc), decodeSell)
	route("POST /v1/internal/orders/{id}/ship", service, resolveOrder(svc.ShipOrder), decodeOrderPath)
	route("POST /v1/internal/orders/{id}/refund", service, resolveOrder(svc.RefundOrder), decodeOrderPath)
	route("POST /v1/internal/orders/{id}/release", service, releaseOrder(svc), decodeRelease)
	route("POST /v1/admin/verify", ops, verify(svc), decodeNothing)
	route("POST /v1/admin/rebuild", admin, rebuild(svc), decodeNothing)
	route("GET /v1/admin/overdue-locks", readers, overdueLocks(svc), decodeOverdue)
	httpx.Health(mux, ready)
	httpx.NotFound(mux)
	return mux
}

// operator is who acts: the subject of the request's verified token.
func operator(r *http.Request) string { return auth.Actor(r.Context()) }

// --- views ---

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

// --- SKUs ---

type createSKURequest struct {
	SKU      string `json:"sku"`
	OnHand   int64  `json:"on_hand"`
	operator string
}

func decodeCreateSKU(_ context.Context, r *http.Request) (any, error) {
	var req createSKURequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return nil, err
	}
	req.operator = operator(r)
	return req, nil
}

func createSKU(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(createSKURequest)
		if err := stock.ValidSKU(req.SKU); err != nil {
			return nil, err
		}
		if req.OnHand < 0 || req.OnHand > stock.MaxQty {
			return nil, invalid("invalid_quantity", "on_hand must be between 0 and %d", stock.MaxQty)
		}
		s, err := svc.CreateSKU(ctx, req.SKU, req.OnHand, req.operator)
		if err != nil {
			return nil, err
		}
		v := viewSKU(s)
		v.status = http.StatusCreated
		return v, nil
	}
}

func decodeSKUPath(_ context.Context, r *http.Request) (any, error) {
	sku := r.PathValue("sku")
	if err := stock.ValidSKU(sku); err != nil {
		return nil, err
	}
	return sku, nil
}

func getSKU(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		s, err := svc.Store().GetSKU(ctx, request.(string))
		if err != nil {
			return nil, err
		}
		return viewSKU(s), nil
	}
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

func decodeSlots(_ context.Context, r *http.Request) (any, error) {
	req := slotsRequest{sku: r.PathValue("sku"), operator: operator(r)}
	if err := stock.ValidSKU(req.sku); err != nil {
		return nil, err
	}
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return nil, err
	}
	if req.Slots < 1 || req.Slots > stock.MaxSlots {
		return nil, invalid("invalid_slots", "slots must be between 1 and %d, got %d", stock.MaxSlots, req.Slots)
	}
	return req, nil
}

func decodeRebalance(_ context.Context, r *http.Request) (any, error) {
	req := slotsRequest{sku: r.PathValue("sku"), operator: operator(r)}
	return req, stock.ValidSKU(req.sku)
}

func setSlots(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(slotsRequest)
		return viewSlots(svc.SetSlots(ctx, req.sku, req.Slots, req.operator))
	}
}

func rebalance(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(slotsRequest)
		return viewSlots(svc.Rebalance(ctx, req.sku, req.operator))
	}
}

func viewSlots(s stock.SKUStock, entries []stock.LedgerEntry, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	resp := slotsResponse{skuView: viewSKU(s), Rebalanced: make([]ledgerView, len(entries))}
	for i, e := range entries {
		resp.Rebalanced[i] = viewLedger(e)
	}
	return resp, nil
}

type ledgerRequest struct {
	sku   string
	after int64
	limit int
}

func decodeLedger(ctx context.Context, r *http.Request) (any, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return nil, err
	}
	req := ledgerRequest{sku: sku.(string), limit: 100}
	q := r.URL.Query()
	if v := q.Get("after"); v != "" {
		if req.after, err = strconv.ParseInt(v, 10, 64); err != nil || req.after < 0 {
			return nil, badRequest("invalid_cursor", "after must be a non-negative ledger id")
		}
	}
	if v := q.Get("limit"); v != "" {
		if req.limit, err = strconv.Atoi(v); err != nil || req.limit < 1 || req.limit > 1000 {
			return nil, badRequest("invalid_limit", "limit must be between 1 and 1000")
		}
	}
	return req, nil
}

type ledgerResponse struct {
	Entries   []ledgerView `json:"entries"`
	NextAfter int64        `json:"next_after,omitempty"` // pass as after= for the next page
}

func ledger(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(ledgerRequest)
		entries, err := svc.Store().Ledger(ctx, req.sku, req.after, req.limit)
		if err != nil {
			return nil, err
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
}

// --- purchases ---

type moveRequest struct {
	Qty      int64  `json:"qty"`
	Remark   string `json:"remark"`
	sku      string
	key      string
	operator string
}

func decodeMove(ctx context.Context, r *http.Request) (any, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return nil, err
	}
	var req moveRequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return nil, err
	}
	req.sku, req.operator = sku.(string), operator(r)
	if req.key = r.Header.Get("Idempotency-Key"); req.key == "" || len(req.key) > 200 {
		return nil, badRequest("idempotency_key_required", "header Idempotency-Key (1-200 characters) is required")
	}
	if len(req.Remark) > 500 || !stock.ValidText(req.Remark) {
		return nil, invalid("invalid_remark", "remark is at most 500 bytes of UTF-8, with no NUL")
	}
	return req, nil
}

type moveFn func(ctx context.Context, sku string, n stock.Qty, key, operator, remark string) (stock.LedgerEntry, bool, error)

func makeMove(move moveFn) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(moveRequest)
		n, err := stock.NewQty(req.Qty)
		if err != nil {
			return nil, err
		}
		e, dup, err := move(ctx, req.sku, n, req.key, req.operator, req.Remark)
		if err != nil {
			return nil, err
		}
		v := viewLedger(e)
		if !dup {
			v.status = http.StatusCreated
		}
		return v, nil
	}
}

func expectPurchase(svc *app.Service) endpoint.Endpoint  { return makeMove(svc.ExpectPurchase) }
func receivePurchase(svc *app.Service) endpoint.Endpoint { return makeMove(svc.ReceivePurchase) }

// --- adjustments ---

type adjustmentRequest struct {
	Kind     string `json:"kind"`
	Delta    *int64 `json:"delta"`
	Counted  *int64 `json:"counted"`
	Reason   string `json:"reason"`
	sku      string
	operator string
}

func decodeAdjustment(ctx context.Context, r *http.Request) (any, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return nil, err
	}
	var req adjustmentRequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return nil, err
	}
	req.sku, req.operator = sku.(string), operator(r)
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

func requestAdjustment(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(adjustmentRequest)
		a, err := stock.NewAdjustment(req.sku, stock.ChangeType(req.Kind), req.Delta, req.Counted, req.Reason, req.operator)
		if err != nil {
			return nil, err
		}
		if a, err = svc.RequestAdjustment(ctx, a); err != nil {
			return nil, err
		}
		v := viewAdjustment(a)
		v.status = http.StatusCreated
		return v, nil
	}
}

type adjustmentIDRequest struct {
	id       int64
	operator string
}

func decodeAdjustmentID(_ context.Context, r *http.Request) (any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, stock.ErrAdjustmentNotFound
	}
	return adjustmentIDRequest{id: id, operator: operator(r)}, nil
}

func getAdjustment(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		a, err := svc.Store().GetAdjustment(ctx, request.(adjustmentIDRequest).id)
		if err != nil {
			return nil, err
		}
		return viewAdjustment(a), nil
	}
}

func decideAdjustment(svc *app.Service, approve bool) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(adjustmentIDRequest)
		a, err := svc.DecideAdjustment(ctx, req.id, approve, req.operator)
		if err != nil {
			return nil, err
		}
		return viewAdjustment(a), nil
	}
}

// --- order locks (internal: ops and tests; the event consumers are the main path) ---

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

func decodeLock(_ context.Context, r *http.Request) (any, error) {
	var req lockRequest
	if err := httpx.DecodeJSON(r, &req); err != nil {
		return nil, err
	}
	req.operator = operator(r)
	return req, nil
}

// validOrderID bounds an order id like a SKU id (they appear in ledger rows and URLs).
func validOrderID(id string) error {
	if id == "" || len(id) > 64 || !stock.ValidText(id) {
		return invalid("invalid_order_id", "order_id must be 1-64 bytes of UTF-8, with no NUL")
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

func lockOrder(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(lockRequest)
		if err := validOrderID(req.OrderID); err != nil {
			return nil, err
		}
		timeout := 30 * time.Minute
		if req.PaymentTimeout != "" {
			d, err := time.ParseDuration(req.PaymentTimeout)
			if err != nil || d < time.Second || d > 24*time.Hour {
				return nil, invalid("invalid_payment_timeout", "payment_timeout must be a duration between 1s and 24h, like \"30m\"")
			}
			timeout = d
		}
		lines := make([]stock.Line, len(req.Items))
		for i, it := range req.Items {
			n, err := stock.NewQty(it.Qty)
			if err != nil {
				return nil, err
			}
			lines[i] = stock.Line{SKU: it.SKU, Qty: n}
		}
		res, err := svc.LockForOrder(ctx, nil, req.OrderID, lines, time.Now().Add(timeout), req.operator)
		if err != nil {
			return nil, err
		}
		if !res.Locked {
			code := map[string]string{postgres.RejectUnknownSKU: "sku_not_found"}[res.Reason]
			if code == "" {
				code = "insufficient_stock"
			}
			return nil, httpx.Errorf(http.StatusConflict, code, "order %s rejected: %s (sku %s)", res.OrderID, res.Reason, res.SKU)
		}
		resp := lockResponse{OrderID: res.OrderID, Status: "locked", ExpiresAt: res.Deadline, Duplicate: res.Duplicate}
		for _, l := range res.Lines {
			resp.Items = append(resp.Items, lineJSON{SKU: l.SKU, Qty: l.Qty.Int64()})
		}
		return resp, nil
	}
}

type orderRequest struct {
	orderID   string
	operator  string
	reason    string
	paymentID string
}

func decodeOrderPath(_ context.Context, r *http.Request) (any, error) {
	id := r.PathValue("id")
	if err := validOrderID(id); err != nil {
		return nil, err
	}
	return orderRequest{orderID: id, operator: operator(r)}, nil
}

func decodeRelease(ctx context.Context, r *http.Request) (any, error) {
	req, err := decodeOrderPath(ctx, r)
	if err != nil {
		return nil, err
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	o := req.(orderRequest)
	o.reason = body.Reason
	return o, nil
}

// decodeSell reads an optional {"payment_id"}: ops may sell by hand, under a payment id.
func decodeSell(ctx context.Context, r *http.Request) (any, error) {
	req, err := decodeOrderPath(ctx, r)
	if err != nil {
		return nil, err
	}
	o := req.(orderRequest)
	o.paymentID = "manual:" + o.operator
	body, err := httpx.ReadBody(r)
	if err != nil || len(body) == 0 {
		return o, err
	}
	var in struct {
		PaymentID string `json:"payment_id"`
	}
	if err := httpx.UnmarshalStrict(body, &in); err != nil {
		return nil, err
	}
	if !stock.ValidText(in.PaymentID) {
		return nil, invalid("invalid_payment_id", "payment_id must be UTF-8 with no NUL")
	}
	if in.PaymentID != "" {
		o.paymentID = in.PaymentID
	}
	return o, nil
}

func sellOrder(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(orderRequest)
		res, err := svc.SellLocked(ctx, nil, req.orderID, req.paymentID, req.operator)
		if err != nil {
			return nil, err
		}
		if res.Failed != "" {
			return nil, httpx.Errorf(http.StatusConflict, res.Failed, "order %s cannot be sold: %s (stock.sell_failed emitted)", req.orderID, res.Failed)
		}
		return viewResolution(res), nil
	}
}

type lockView struct {
	SKU      string    `json:"sku"`
	Qty      int64     `json:"qty"`
	State    string    `json:"state"`
	Deadline time.Time `json:"deadline"`
}

func orderLocks(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(orderRequest)
		locks, err := svc.Store().Locks(ctx, req.orderID)
		if err != nil {
			return nil, err
		}
		if len(locks) == 0 {
			return nil, stock.ErrNoLock
		}
		out := struct {
			OrderID string     `json:"order_id"`
			Locks   []lockView `json:"locks"`
		}{OrderID: req.orderID}
		for _, l := range locks {
			out.Locks = append(out.Locks, lockView{SKU: l.SKU(), Qty: l.Qty().Int64(), State: string(l.State()), Deadline: l.Deadline()})
		}
		return out, nil
	}
}

// orderOutcome is what stock knows of an order — its lock outcome, the payment that sold it
// and its locks — for the other services' reconciliation jobs (paid but not sold, stuck
// orders). 404 order_not_found when stock never saw the order.
func orderOutcome(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(orderRequest)
		o, err := svc.Store().GetOrderOutcome(ctx, req.orderID)
		if errors.Is(err, stock.ErrOrderUnknown) {
			return nil, httpx.Errorf(http.StatusNotFound, "order_not_found", "stock has no record of order %s", req.orderID)
		}
		if err != nil {
			return nil, err
		}
		out := struct {
			OrderID      string     `json:"order_id"`
			Outcome      string     `json:"outcome"`
			RejectReason string     `json:"reject_reason,omitempty"`
			RejectSKU    string     `json:"reject_sku,omitempty"`
			PaidBy       string     `json:"paid_by,omitempty"`
			Deadline     time.Time  `json:"deadline"`
			Locks        []lockView `json:"locks"`
		}{OrderID: o.OrderID, Outcome: o.Outcome, RejectReason: o.RejectReason, RejectSKU: o.RejectSKU, PaidBy: o.PaidBy,
			Deadline: o.Deadline, Locks: []lockView{}}
		for _, l := range o.Locks {
			out.Locks = append(out.Locks, lockView{SKU: l.SKU(), Qty: l.Qty().Int64(), State: string(l.State()), Deadline: l.Deadline()})
		}
		return out, nil
	}
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

func resolveOrder(fn func(ctx context.Context, in *app.Inbound, orderID, operator string) (app.Resolution, error)) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(orderRequest)
		res, err := fn(ctx, nil, req.orderID, req.operator)
		if err != nil {
			return nil, err
		}
		return viewResolution(res), nil
	}
}

func releaseOrder(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(orderRequest)
		reason := map[string]stock.ChangeType{"timeout": stock.ChangeReleaseTimeout, "cancel": stock.ChangeReleaseCancel}[req.reason]
		if reason == "" {
			return nil, invalid("invalid_reason", "reason must be timeout or cancel")
		}
		res, err := svc.ReleaseLock(ctx, nil, req.orderID, reason, req.operator)
		if err != nil {
			return nil, err
		}
		return viewResolution(res), nil
	}
}

// --- admin ---

func decodeNothing(context.Context, *http.Request) (any, error) { return nil, nil }

func verify(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, _ any) (any, error) {
		diffs, err := svc.Store().Verify(ctx)
		if err != nil {
			return nil, err
		}
		return VerifyReport{Consistent: len(diffs) == 0, Differences: diffs}, nil
	}
}

// VerifyReport is the body of POST /v1/admin/verify and the output of `stock verify`.
type VerifyReport struct {
	Consistent  bool                  `json:"consistent"`
	Differences []postgres.Difference `json:"differences"`
}

func rebuild(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, _ any) (any, error) {
		changed, err := svc.Store().Rebuild(ctx)
		if err != nil {
			return nil, err
		}
		if changed == nil {
			changed = []string{}
		}
		return struct {
			Rebuilt []string `json:"rebuilt"`
		}{changed}, nil
	}
}

func decodeOverdue(_ context.Context, r *http.Request) (any, error) {
	grace := time.Duration(0)
	if v := r.URL.Query().Get("grace"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, badRequest("invalid_grace", "grace must be a non-negative duration like 30s")
		}
		grace = d
	}
	return grace, nil
}

// overdueLocks lists locks still held more than grace after their deadline: after a healthy
// run there are none (the timeout service and its sweeper release them).
func overdueLocks(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		n, orders, err := svc.Store().OverdueLocks(ctx, time.Now().Add(-request.(time.Duration)), 100)
		if err != nil {
			return nil, err
		}
		if orders == nil {
			orders = []string{}
		}
		return struct {
			Count  int      `json:"count"`
			Orders []string `json:"orders"`
		}{n, orders}, nil
	}
}
