package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentation = "github.com/stockflow/stockflow/pkg/reconcile"

// Runner runs a service's jobs, one run of a job at a time across every replica sharing the
// database.
type Runner struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	jobs     []Job
	found    metric.Int64Counter
	repaired metric.Int64Counter
}

// NewRunner returns a Runner of jobs on pool, a database with Schema applied. Job names must
// be unique and not "all".
func NewRunner(pool *pgxpool.Pool, log *slog.Logger, jobs ...Job) (*Runner, error) {
	seen := map[string]bool{"all": true}
	for _, j := range jobs {
		if j.Name == "" || seen[j.Name] || j.Run == nil {
			return nil, fmt.Errorf("reconcile: job %q: empty, duplicate or without Run", j.Name)
		}
		seen[j.Name] = true
	}
	meter := otel.Meter(instrumentation)
	found, err := meter.Int64Counter("stockflow.reconcile.found",
		metric.WithDescription("Problems reconciliation jobs found."), metric.WithUnit("{finding}"))
	if err != nil {
		return nil, fmt.Errorf("reconcile: counter: %w", err)
	}
	repaired, err := meter.Int64Counter("stockflow.reconcile.repaired",
		metric.WithDescription("Problems reconciliation jobs repaired."), metric.WithUnit("{finding}"))
	if err != nil {
		return nil, fmt.Errorf("reconcile: counter: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Runner{pool: pool, log: log.With("component", "reconcile"), jobs: jobs, found: found, repaired: repaired}, nil
}

// Jobs returns the runner's jobs in the order they were given.
func (r *Runner) Jobs() []Job { return append([]Job(nil), r.jobs...) }

// Job returns the job called name, or ErrUnknownJob.
func (r *Runner) Job(name string) (Job, error) {
	for _, j := range r.jobs {
		if j.Name == name {
			return j, nil
		}
	}
	return Job{}, fmt.Errorf("%w: %q", ErrUnknownJob, name)
}

// Run runs the job called name once in mode and returns its report, stored in reconcile_run
// and counted in the metrics. It returns ErrUnknownJob or ErrBadMode without running, and
// ErrAlreadyRunning when another run of the job holds its lock (on any replica). A failed job
// returns its report (with Error set, findings so far kept) and the error.
func (r *Runner) Run(ctx context.Context, name string, mode Mode, trigger string) (Report, error) {
	job, err := r.Job(name)
	if err != nil {
		return Report{}, err
	}
	if _, err := ParseMode(string(mode)); err != nil {
		return Report{}, err
	}
	unlock, err := r.lock(ctx, name)
	if err != nil {
		return Report{}, err
	}
	defer unlock()

	rep := Report{Job: name, Mode: mode, Trigger: trigger, Started: time.Now().UTC().Truncate(time.Microsecond)}
	if err := r.pool.QueryRow(ctx, `INSERT INTO reconcile_run (job, mode, trigger, started) VALUES ($1, $2, $3, $4) RETURNING id`,
		name, string(mode), trigger, rep.Started).Scan(&rep.ID); err != nil {
		return Report{}, fmt.Errorf("reconcile %s: record start: %w", name, err)
	}
	res, runErr := job.Run(ctx, mode)
	rep.Finished = time.Now().UTC().Truncate(time.Microsecond)
	rep.Checked, rep.Findings = res.Checked, res.Findings
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	rep.Found = len(rep.Findings)
	for _, f := range rep.Findings {
		if f.Repaired {
			rep.Repaired++
		}
	}
	if runErr != nil {
		rep.Error = runErr.Error()
	}
	// Label reconcile_job only (docs/observability.md): not job, which Prometheus sets to the
	// scrape target's; not mode: a check's findings are problems as much as a repair's.
	attrs := metric.WithAttributes(attribute.String("reconcile.job", name))
	r.found.Add(ctx, int64(rep.Found), attrs)
	r.repaired.Add(ctx, int64(rep.Repaired), attrs)
	if err := r.finish(ctx, rep); err != nil {
		return rep, errors.Join(runErr, err)
	}
	attrsLog := []any{"job", name, "mode", string(mode), "trigger", trigger, "checked", rep.Checked, "found", rep.Found, "repaired", rep.Repaired}
	if runErr != nil {
		r.log.ErrorContext(ctx, "reconcile run failed", append(attrsLog, "err", runErr)...)
		return rep, fmt.Errorf("reconcile %s: %w", name, runErr)
	}
	if rep.Found > 0 {
		r.log.InfoContext(ctx, "reconcile run", attrsLog...)
	}
	return rep, nil
}

func (r *Runner) finish(ctx context.Context, rep Report) error {
	findings, err := json.Marshal(rep.Findings)
	if err != nil {
		return fmt.Errorf("reconcile %s: findings: %w", rep.Job, err)
	}
	_, err = r.pool.Exec(context.WithoutCancel(ctx), `UPDATE reconcile_run SET finished = $2, checked = $3, found = $4, repaired = $5,
		findings = $6, error = $7 WHERE id = $1`, rep.ID, rep.Finished, rep.Checked, rep.Found, rep.Repaired, findings, rep.Error)
	if err != nil {
		return fmt.Errorf("reconcile %s: record finish: %w", rep.Job, err)
	}
	return nil
}

// lock takes the job's session advisory lock on a connection of its own, held (outside any
// transaction, so the outbox relay's horizon is not held back) until unlock.
func (r *Runner) lock(ctx context.Context, name string) (unlock func(), err error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: lock: %w", name, err)
	}
	key := "reconcile:" + name
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, key).Scan(&got); err != nil {
		conn.Release()
		return nil, fmt.Errorf("reconcile %s: lock: %w", name, err)
	}
	if !got {
		conn.Release()
		return nil, fmt.Errorf("%w: %s", ErrAlreadyRunning, name)
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key); err != nil {
			// Closing the session is what frees a session lock for sure.
			r.log.Warn("reconcile unlock failed; closing the connection", "job", name, "err", err)
			if err := conn.Hijack().Close(uctx); err != nil {
				r.log.Error("closing the connection that holds the job lock failed", "job", name, "err", err)
			}
			return
		}
		conn.Release()
	}, nil
}

// Runs returns up to limit stored runs, newest first, of job (every job when empty).
func (r *Runner) Runs(ctx context.Context, job string, limit int) ([]Report, error) {
	if job != "" {
		if _, err := r.Job(job); err != nil {
			return nil, err
		}
	}
	rows, err := r.pool.Query(ctx, `SELECT id, job, mode, trigger, started, coalesce(finished, started), checked, found, repaired, findings, error
		FROM reconcile_run WHERE $1 = '' OR job = $1 ORDER BY id DESC LIMIT $2`, job, limit)
	if err != nil {
		return nil, fmt.Errorf("reconcile runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Report, error) {
		var rep Report
		var mode string
		var findings []byte
		err := row.Scan(&rep.ID, &rep.Job, &mode, &rep.Trigger, &rep.Started, &rep.Finished, &rep.Checked, &rep.Found,
			&rep.Repaired, &findings, &rep.Error)
		if err != nil {
			return rep, err
		}
		rep.Mode = Mode(mode)
		rep.Started, rep.Finished = rep.Started.UTC(), rep.Finished.UTC()
		return rep, json.Unmarshal(findings, &rep.Findings)
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile runs: %w", err)
	}
	return out, nil
}
