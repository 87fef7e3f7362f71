package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/app"
)

// The flash-sale gate of a SKU (pkg/gate, app.Gates): POST /v1/skus/{sku}/gate plans it —
// armed from the database now, or at arm_at (the seed's prewarm, ten minutes ahead) — GET
// shows Redis's counter against the database, DELETE disarms it. Without REDIS_URL every
// route answers 503 gate_unavailable.

// MaxArmAhead is how far ahead a gate may be planned.
const MaxArmAhead = 30 * 24 * time.Hour

var codeInvalidArmAt = httpx.NewCode(http.StatusUnprocessableEntity, "invalid_arm_at")

// WithGates serves the gate routes from g.
func WithGates(g *app.Gates) Option { return func(p *parts) { p.gates = g } }

// gateRoutes adds the gate routes to mux: read for GET, change for POST and DELETE.
func gateRoutes(mux *http.ServeMux, t httpx.Transport, p parts, read, change func(http.Handler) http.Handler) {
	gates := func() (*app.Gates, error) {
		if p.gates == nil {
			return nil, app.ErrGateUnavailable
		}
		return p.gates, nil
	}
	mux.Handle("POST /v1/skus/{sku}/gate", change(httpx.Server(t, decodeArm, func(ctx context.Context, req armRequest) (app.GateView, error) {
		g, err := gates()
		if err != nil {
			return app.GateView{}, err
		}
		return g.Arm(ctx, req.sku, req.ArmAt, req.operator)
	})))
	mux.Handle("GET /v1/skus/{sku}/gate", read(httpx.Server(t, decodeSKUPath, func(ctx context.Context, sku string) (app.GateView, error) {
		g, err := gates()
		if err != nil {
			return app.GateView{}, err
		}
		return g.View(ctx, sku)
	})))
	mux.Handle("DELETE /v1/skus/{sku}/gate", change(httpx.Server(t, decodeSKUPath, func(ctx context.Context, sku string) (app.GateView, error) {
		g, err := gates()
		if err != nil {
			return app.GateView{}, err
		}
		return g.Disarm(ctx, sku)
	})))
}

// armRequest is POST /v1/skus/{sku}/gate: {"arm_at": RFC 3339} or an empty body (now). A
// time in the past arms now; one more than MaxArmAhead ahead is 422 invalid_arm_at.
type armRequest struct {
	sku      string
	ArmAt    time.Time `json:"arm_at"`
	operator string
}

func decodeArm(ctx context.Context, r *http.Request) (armRequest, error) {
	sku, err := decodeSKUPath(ctx, r)
	if err != nil {
		return armRequest{}, err
	}
	body, err := httpx.ReadBody(r)
	if err != nil {
		return armRequest{}, err
	}
	var req armRequest
	if len(body) > 0 {
		if err := httpx.UnmarshalStrict(body, &req); err != nil {
			return armRequest{}, err
		}
	}
	if req.ArmAt.After(time.Now().Add(MaxArmAhead)) {
		return armRequest{}, codeInvalidArmAt.Errorf("arm_at is more than %s ahead", MaxArmAhead)
	}
	req.sku, req.operator = sku, operator(r)
	return req, nil
}
