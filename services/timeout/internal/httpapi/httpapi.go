// Package httpapi is the timeout service's admin HTTP API: health, a deadline's state, and a
// sweep on demand (DESIGN §6: jobs run on a schedule and on demand). go-kit endpoints with
// one error mapping (errors.go).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

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
	t := httpx.Transport{Log: log, Errors: errs}
	e := endpoints{svc}
	mux.Handle("GET /v1/deadlines/{order_id}", v.Require(httpx.Server(t, decodeOrderID, e.getDeadline), auth.Readers...))
	mux.Handle("POST /v1/admin/sweep", v.Require(httpx.Server(t, httpx.NoRequest, e.sweep), auth.Operator, auth.Admin))
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

// endpoints are the API's use cases, one method per route.
type endpoints struct{ svc *app.Service }

func decodeOrderID(_ context.Context, r *http.Request) (string, error) {
	id := r.PathValue("order_id")
	if id == "" || len(id) > 128 {
		return "", codeDeadlineNotFound.Errorf("no deadline for order %q", id)
	}
	return id, nil
}

func (e endpoints) getDeadline(ctx context.Context, orderID string) (deadlineView, error) {
	d, err := e.svc.Get(ctx, orderID)
	if err != nil {
		return deadlineView{}, err
	}
	s := d.Snapshot()
	v := deadlineView{OrderID: s.OrderID, State: s.State.String(), Resolution: s.Resolution, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if !s.At.IsZero() {
		v.Deadline = &s.At
	}
	return v, nil
}

type sweepResponse struct {
	Expired int `json:"expired"`
}

func (e endpoints) sweep(ctx context.Context, _ struct{}) (sweepResponse, error) {
	n, err := e.svc.Sweep(ctx)
	return sweepResponse{Expired: n}, err
}
