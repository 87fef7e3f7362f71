package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/httpx"
)

// Mount returns h with the admin API of r in front of it:
//
//	POST /v1/admin/reconcile/{job}?mode=check|repair   run a job now → 200 and its Report
//	GET  /v1/admin/reconcile/runs?job=&limit=           stored runs, newest first → {"runs": […]}
//
// The mode may also come as a JSON body {"mode": "repair"}; it defaults to check. Errors:
// 404 unknown_job, 400 invalid_mode, invalid_limit or malformed_json, 409 already_running
// (another replica, or another call, is running the job), 500 job_failed (the run is stored
// with its error).
//
// Who: a check needs the operator or admin role, a repair the admin role; reading runs any
// staff or viewer role. A run records the token's subject as its trigger ("api:alice").
func Mount(h http.Handler, r *Runner, log *slog.Logger, v *auth.Verifier) http.Handler {
	mux := http.NewServeMux()
	opts := httpx.ServerOptions(log, mapError)
	mux.Handle("POST /v1/admin/reconcile/{job}", v.Require(kithttp.NewServer(runEndpoint(r), decodeRun, httpx.EncodeJSON, opts...), auth.Operator, auth.Admin))
	mux.Handle("GET /v1/admin/reconcile/runs", v.Require(kithttp.NewServer(runsEndpoint(r), decodeRuns, httpx.EncodeJSON, opts...), auth.Readers...))
	mux.Handle("/", h)
	return mux
}

func mapError(err error) *httpx.Error {
	switch {
	case errors.Is(err, ErrUnknownJob):
		return httpx.Errorf(http.StatusNotFound, "unknown_job", "%v", err)
	case errors.Is(err, ErrBadMode):
		return httpx.Errorf(http.StatusBadRequest, "invalid_mode", "%v", err)
	case errors.Is(err, ErrAlreadyRunning):
		return httpx.Errorf(http.StatusConflict, "already_running", "%v; try again when it has finished", err)
	case errors.Is(err, errJobFailed):
		return httpx.Errorf(http.StatusInternalServerError, "job_failed", "%v", err)
	}
	return nil
}

// errJobFailed marks a run that started and failed, as opposed to a failure to start one.
var errJobFailed = errors.New("job failed")

type runRequest struct {
	job  string
	mode Mode
}

func decodeRun(_ context.Context, r *http.Request) (any, error) {
	req := runRequest{job: r.PathValue("job"), mode: Check}
	mode := r.URL.Query().Get("mode")
	body, err := httpx.ReadBody(r)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		var in struct {
			Mode string `json:"mode"`
		}
		if err := httpx.UnmarshalStrict(body, &in); err != nil {
			return nil, err
		}
		if in.Mode != "" {
			mode = in.Mode
		}
	}
	if mode != "" {
		if req.mode, err = ParseMode(mode); err != nil {
			return nil, err
		}
	}
	return req, nil
}

func runEndpoint(r *Runner) func(ctx context.Context, request any) (any, error) {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(runRequest)
		if _, err := r.Job(req.job); err != nil {
			return nil, err
		}
		if req.mode == Repair && !auth.FromContext(ctx).Has(auth.Admin) {
			return nil, auth.Forbidden("a repair needs the admin role; an operator may run check")
		}
		rep, err := r.Run(ctx, req.job, req.mode, "api:"+auth.Actor(ctx))
		if err != nil && rep.ID != 0 {
			return nil, errors.Join(errJobFailed, err)
		}
		return rep, err
	}
}

type runsRequest struct {
	job   string
	limit int
}

func decodeRuns(_ context.Context, r *http.Request) (any, error) {
	req := runsRequest{job: r.URL.Query().Get("job"), limit: 20}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return nil, httpx.Errorf(http.StatusBadRequest, "invalid_limit", "limit must be between 1 and 500")
		}
		req.limit = n
	}
	return req, nil
}

func runsEndpoint(r *Runner) func(ctx context.Context, request any) (any, error) {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(runsRequest)
		runs, err := r.Runs(ctx, req.job, req.limit)
		if err != nil {
			return nil, err
		}
		if runs == nil {
			runs = []Report{}
		}
		return struct {
			Runs []Report `json:"runs"`
		}{runs}, nil
	}
}
