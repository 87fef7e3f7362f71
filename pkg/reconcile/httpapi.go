package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

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
	t := httpx.Transport{Log: log, Errors: errs}
	mux.Handle("POST /v1/admin/reconcile/{job}", v.Require(httpx.Server(t, decodeRun, runEndpoint(r)), auth.Operator, auth.Admin))
	mux.Handle("GET /v1/admin/reconcile/runs", v.Require(httpx.Server(t, decodeRuns, runsEndpoint(r)), auth.Readers...))
	mux.Handle("/", h)
	return mux
}

var codeInvalidLimit = httpx.NewCode(http.StatusBadRequest, "invalid_limit")

// errs maps the runner's errors to HTTP: the one place that does.
var errs = httpx.Table{Rules: []httpx.Rule{
	{Err: ErrUnknownJob, Code: httpx.NewCode(http.StatusNotFound, "unknown_job")},
	{Err: ErrBadMode, Code: httpx.NewCode(http.StatusBadRequest, "invalid_mode")},
	{Err: ErrAlreadyRunning, Code: httpx.NewCode(http.StatusConflict, "already_running"),
		Message: func(err, _ error) string { return err.Error() + "; try again when it has finished" }},
	{Err: errJobFailed, Code: httpx.NewCode(http.StatusInternalServerError, "job_failed")},
}}

// errJobFailed marks a run that started and failed, as opposed to a failure to start one.
var errJobFailed = errors.New("job failed")

type runRequest struct {
	job  string
	mode Mode
}

func decodeRun(_ context.Context, r *http.Request) (runRequest, error) {
	req := runRequest{job: r.PathValue("job"), mode: Check}
	mode := r.URL.Query().Get("mode")
	body, err := httpx.ReadBody(r)
	if err != nil {
		return req, err
	}
	if len(body) > 0 {
		var in struct {
			Mode string `json:"mode"`
		}
		if err := httpx.UnmarshalStrict(body, &in); err != nil {
			return req, err
		}
		if in.Mode != "" {
			mode = in.Mode
		}
	}
	if mode != "" {
		if req.mode, err = ParseMode(mode); err != nil {
			return req, err
		}
	}
	return req, nil
}

func runEndpoint(r *Runner) func(context.Context, runRequest) (Report, error) {
	return func(ctx context.Context, req runRequest) (Report, error) {
		if _, err := r.Job(req.job); err != nil {
			return Report{}, err
		}
		if req.mode == Repair && !auth.FromContext(ctx).Has(auth.Admin) {
			return Report{}, auth.Forbidden("a repair needs the admin role; an operator may run check")
		}
		rep, err := r.Run(ctx, req.job, req.mode, "api:"+auth.Actor(ctx))
		if err != nil && rep.ID != 0 {
			return Report{}, errors.Join(errJobFailed, err)
		}
		return rep, err
	}
}

type runsRequest struct {
	job   string
	limit int
}

func decodeRuns(_ context.Context, r *http.Request) (runsRequest, error) {
	req := runsRequest{job: r.URL.Query().Get("job"), limit: 20}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return req, codeInvalidLimit.Errorf("limit must be between 1 and 500")
		}
		req.limit = n
	}
	return req, nil
}

// runsView is the body of GET /v1/admin/reconcile/runs.
type runsView struct {
	Runs []Report `json:"runs"`
}

func runsEndpoint(r *Runner) func(context.Context, runsRequest) (runsView, error) {
	return func(ctx context.Context, req runsRequest) (runsView, error) {
		runs, err := r.Runs(ctx, req.job, req.limit)
		if err != nil {
			return runsView{}, err
		}
		if runs == nil {
			runs = []Report{}
		}
		return runsView{runs}, nil
	}
}
