package reconcile_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/reconcile"
)

// gateJob is a job that finds what it is told and, while gate is open, waits for it to close:
// it lets a test hold a run in progress.
type gateJob struct {
	runs     atomic.Int32
	started  chan struct{}
	gate     chan struct{}
	findings []reconcile.Finding
}

func (g *gateJob) job(name string) reconcile.Job {
	return reconcile.Job{Name: name, Run: func(ctx context.Context, mode reconcile.Mode) (reconcile.Result, error) {
		g.runs.Add(1)
		if g.started != nil {
			close(g.started)
			<-g.gate
		}
		fs := append([]reconcile.Finding(nil), g.findings...)
		for i := range fs {
			fs[i].Repaired = mode == reconcile.Repair
		}
		return reconcile.Result{Checked: 10, Findings: fs}, nil
	}}
}

func TestRunRecordsTheReport(t *testing.T) {
	pool, _ := pgtest.New(t, reconcile.Schema)
	g := &gateJob{findings: []reconcile.Finding{{Kind: "thing", IDs: map[string]string{"id": "a"}, Detail: "a is wrong"}}}
	r, err := reconcile.NewRunner(pool, nil, g.job("things"))
	require.NoError(t, err)
	ctx := context.Background()

	check, err := r.Run(ctx, "things", reconcile.Check, "test")
	require.NoError(t, err)
	assert.Equal(t, 10, check.Checked)
	assert.Equal(t, 1, check.Found)
	assert.Equal(t, 0, check.Repaired)
	repair, err := r.Run(ctx, "things", reconcile.Repair, "test")
	require.NoError(t, err)
	assert.Equal(t, 1, repair.Repaired)
	assert.False(t, repair.Finished.Before(repair.Started))

	runs, err := r.Runs(ctx, "things", 10)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, repair, runs[0], "the stored run is the report")
	assert.Equal(t, check.ID, runs[1].ID)

	_, err = r.Run(ctx, "nope", reconcile.Check, "test")
	assert.ErrorIs(t, err, reconcile.ErrUnknownJob)
	_, err = r.Run(ctx, "things", "fix", "test")
	assert.ErrorIs(t, err, reconcile.ErrBadMode)
}

// Two replicas (two pools on one database) trigger the same job at once: it runs once, the
// other trigger is told it is already running; once it is done the job runs again.
func TestConcurrentTriggersRunTheJobOnce(t *testing.T) {
	pool, url := pgtest.New(t, reconcile.Schema)
	other, err := postgres.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(other.Close)
	g := &gateJob{started: make(chan struct{}), gate: make(chan struct{})}
	a, err := reconcile.NewRunner(pool, nil, g.job("slow"))
	require.NoError(t, err)
	b, err := reconcile.NewRunner(other, nil, g.job("slow"))
	require.NoError(t, err)
	ctx := context.Background()

	var wg sync.WaitGroup
	var first reconcile.Report
	var firstErr error
	wg.Go(func() { first, firstErr = a.Run(ctx, "slow", reconcile.Repair, "replica-a") })
	<-g.started
	_, err = b.Run(ctx, "slow", reconcile.Repair, "replica-b")
	assert.ErrorIs(t, err, reconcile.ErrAlreadyRunning)
	_, err = a.Run(ctx, "slow", reconcile.Repair, "replica-a")
	assert.ErrorIs(t, err, reconcile.ErrAlreadyRunning, "the same replica is refused too")
	close(g.gate)
	wg.Wait()
	require.NoError(t, firstErr)
	assert.Equal(t, int32(1), g.runs.Load())
	assert.NotZero(t, first.ID)

	g.started = nil
	_, err = b.Run(ctx, "slow", reconcile.Check, "replica-b")
	require.NoError(t, err, "the lock is free once the run ended")
	assert.Equal(t, int32(2), g.runs.Load())
	runs, err := a.Runs(ctx, "", 10)
	require.NoError(t, err)
	assert.Len(t, runs, 2, "refused triggers leave no run behind")
}

func TestAdminAPIRejectsBadInput(t *testing.T) {
	pool, _ := pgtest.New(t, reconcile.Schema)
	g := &gateJob{started: make(chan struct{}), gate: make(chan struct{})}
	r, err := reconcile.NewRunner(pool, nil, g.job("slow"))
	require.NoError(t, err)
	kit := authtest.New(t)
	srv := httptest.NewServer(reconcile.Mount(http.NotFoundHandler(), r, nil, kit.Verifier))
	t.Cleanup(srv.Close)
	admin := kit.Bearer("ada", auth.Admin)

	done := make(chan struct{})
	go func() { defer close(done); _, _ = r.Run(context.Background(), "slow", reconcile.Check, "test") }()
	<-g.started
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
		bearer                   string // default: admin
	}{
		{"no token", "POST", "/v1/admin/reconcile/slow?mode=check", "", 401, "unauthenticated", "-"},
		{"a viewer may not run", "POST", "/v1/admin/reconcile/slow?mode=check", "", 403, "forbidden", kit.Bearer("vi", auth.Viewer)},
		{"an operator may not repair", "POST", "/v1/admin/reconcile/slow?mode=repair", "", 403, "forbidden", kit.Bearer("op", auth.Operator)},
		{"a buyer may not read runs", "GET", "/v1/admin/reconcile/runs", "", 403, "forbidden", kit.Bearer("u1", auth.Buyer)},
		{"unknown job", "POST", "/v1/admin/reconcile/nope?mode=check", "", 404, "unknown_job", ""},
		{"bad mode in the query", "POST", "/v1/admin/reconcile/slow?mode=fix", "", 400, "invalid_mode", ""},
		{"bad mode in the body", "POST", "/v1/admin/reconcile/slow", `{"mode":"fix"}`, 400, "invalid_mode", ""},
		{"unknown body field", "POST", "/v1/admin/reconcile/slow", `{"mood":"repair"}`, 400, "malformed_json", ""},
		{"already running", "POST", "/v1/admin/reconcile/slow?mode=repair", "", 409, "already_running", ""},
		{"runs of an unknown job", "GET", "/v1/admin/reconcile/runs?job=nope", "", 404, "unknown_job", ""},
		{"bad limit", "GET", "/v1/admin/reconcile/runs?limit=0", "", 400, "invalid_limit", ""},
		{"huge limit", "GET", "/v1/admin/reconcile/runs?limit=100000", "", 400, "invalid_limit", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			switch tc.bearer {
			case "":
				req.Header.Set("Authorization", admin)
			case "-":
			default:
				req.Header.Set("Authorization", tc.bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, tc.code, body.Error.Code)
		})
	}
	close(g.gate)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the held run did not finish")
	}

	// And the happy path through HTTP: a JSON body picks the mode.
	g.started = nil
	req, err := http.NewRequest("POST", srv.URL+"/v1/admin/reconcile/slow", strings.NewReader(`{"mode":"repair"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", admin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var rep reconcile.Report
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, reconcile.Repair, rep.Mode)
	assert.Equal(t, "api:ada", rep.Trigger, "the run records who asked")
	var runs struct{ Runs []reconcile.Report }
	status, _, err := httpx.GetJSON(context.Background(), bearerClient(admin), srv.URL+"/v1/admin/reconcile/runs?job=slow&limit=5", &runs)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Len(t, runs.Runs, 2)
}

// The schedule runs each job with an interval in the configured mode (check for the jobs
// named check-only), and skips jobs without one.
func TestLoopsRunOnSchedule(t *testing.T) {
	pool, _ := pgtest.New(t, reconcile.Schema)
	fix, watch, never := &gateJob{}, &gateJob{}, &gateJob{}
	jobs := []reconcile.Job{fix.job("fix"), watch.job("watch"), never.job("never")}
	jobs[0].Interval, jobs[1].Interval = 20*time.Millisecond, 20*time.Millisecond
	r, err := reconcile.NewRunner(pool, nil, jobs...)
	require.NoError(t, err)
	loops := r.Loops(reconcile.Repair, []string{"watch"})
	require.Len(t, loops, 2)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(func() { assert.NoError(t, l(ctx)) })
	}
	require.Eventually(t, func() bool { return fix.runs.Load() >= 2 && watch.runs.Load() >= 2 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	wg.Wait()
	assert.Zero(t, never.runs.Load())
	for job, mode := range map[string]reconcile.Mode{"fix": reconcile.Repair, "watch": reconcile.Check} {
		runs, err := r.Runs(context.Background(), job, 100)
		require.NoError(t, err)
		require.NotEmpty(t, runs)
		for _, run := range runs {
			assert.Equal(t, mode, run.Mode, job)
			assert.Equal(t, "schedule", run.Trigger)
		}
	}
}

// bearerClient sends every request with the given Authorization header.
func bearerClient(header string) *http.Client {
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", header)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
