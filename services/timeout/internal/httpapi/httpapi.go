// Package httpapi is the timeout service's admin HTTP API: health, a deadline's state, and a
// sweep on demand (DESIGN §6: jobs run on a schedule and on demand). go-kit endpoints with
// one error mapping (errors.go).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/timeout/internal/app"
)

// Handler returns the timeout admin API:
//
//	GET  /v1/deadlines/{order_id}  the order's deadline → 200, 404 deadline_not_found
//	POST /v1/admin/sweep           expire every overdue deadline now → 200 {"expired": n}
//	GET  /healthz, GET /readyz     liveness; readiness is ready() == nil
//
// Who (pkg/auth): reading a deadline needs a viewer, staff or service token; a sweep an
// operator or admin.
func Handler(svc *app.Service, log *slog.Logger, ready func(context.Context) error, v *auth.Verifier) http.Handler {
	mux := http.NewServeMux()
	opts := httpx.ServerOptions(log, mapError)
	route := func(pattern string, roles []auth.Role, ep endpoint.Endpoint, dec kithttp.DecodeRequestFunc) {
		mux.Handle(pattern, v.Require(kithttp.NewServer(ep, dec, httpx.EncodeJSON, opts...), roles...))
	}
	route("GET /v1/deadlines/{order_id}", auth.Readers, getDeadline(svc), decodeOrderID)
	route("POST /v1/admin/sweep", []auth.Role{auth.Operator, auth.Admin}, sweep(svc), kithttp.NopRequestDecoder)
	httpx.Health(mux, ready)
	httpx.NotFound(mux)
	return mux
}

type deadlineView struct {
	OrderID    string     `json:"order_id"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	State      string     `json:"state"`
	Resolution string     `json:"resolution,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

func decodeOrderID(_ context.Context, r *http.Request) (any, error) {
	id := r.PathValue("order_id")
	if id == "" || len(id) > 128 {
		return nil, httpx.Errorf(http.StatusNotFound, "deadline_not_found", "no deadline for order %q", id)
	}
	return id, nil
}

func getDeadline(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		d, err := svc.Get(ctx, request.(string))
		if err != nil {
			return nil, err
		}
		s := d.Snapshot()
		v := deadlineView{OrderID: s.OrderID, State: s.State.String(), Resolution: s.Resolution, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
		if !s.At.IsZero() {
			v.Deadline = &s.At
		}
		return v, nil
	}
}

type sweepResponse struct {
	Expired int `json:"expired"`
}

func sweep(svc *app.Service) endpoint.Endpoint {
	return func(ctx context.Context, _ any) (any, error) {
		n, err := svc.Sweep(ctx)
		if err != nil {
			return nil, err
		}
		return sweepResponse{Expired: n}, nil
	}
}
