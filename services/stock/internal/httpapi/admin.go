package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Admin: POST /v1/admin/verify and /rebuild, GET /v1/admin/overdue-locks.

// VerifyReport is the body of POST /v1/admin/verify and the output of `stock verify`.
type VerifyReport struct {
	Consistent  bool               `json:"consistent"`
	Differences []stock.Difference `json:"differences"`
}

func (e endpoints) verify(ctx context.Context, _ struct{}) (VerifyReport, error) {
	diffs, err := e.svc.Verify(ctx)
	if err != nil {
		return VerifyReport{}, err
	}
	return VerifyReport{Consistent: len(diffs) == 0, Differences: diffs}, nil
}

type rebuildResponse struct {
	Rebuilt []string `json:"rebuilt"`
}

func (e endpoints) rebuild(ctx context.Context, _ struct{}) (rebuildResponse, error) {
	changed, err := e.svc.Rebuild(ctx)
	if err != nil {
		return rebuildResponse{}, err
	}
	if changed == nil {
		changed = []string{}
	}
	return rebuildResponse{changed}, nil
}

func decodeOverdue(_ context.Context, r *http.Request) (time.Duration, error) {
	grace := time.Duration(0)
	if v := r.URL.Query().Get("grace"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, codeInvalidGrace.Errorf("grace must be a non-negative duration like 30s")
		}
		grace = d
	}
	return grace, nil
}

type overdueResponse struct {
	Count  int      `json:"count"`
	Orders []string `json:"orders"`
}

// overdueLocks lists locks still held more than grace after their deadline: after a healthy
// run there are none (the timeout service and its sweeper release them).
func (e endpoints) overdueLocks(ctx context.Context, grace time.Duration) (overdueResponse, error) {
	n, orders, err := e.svc.OverdueLocks(ctx, e.svc.Now().Add(-grace), 100)
	if err != nil {
		return overdueResponse{}, err
	}
	if orders == nil {
		orders = []string{}
	}
	return overdueResponse{n, orders}, nil
}
