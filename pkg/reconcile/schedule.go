package reconcile

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Loops returns one service loop (pkg/service Parts.Loops) per job with an Interval: every
// Interval it runs the job in mode, or in Check mode when the job is named in checkOnly. A
// run another replica already has going is skipped quietly; a failed run is logged (and
// stored), never fatal: the next tick tries again. Each loop waits one Interval before its
// first run, so a restarting fleet does not run every job at once at startup.
func (r *Runner) Loops(mode Mode, checkOnly []string) []func(context.Context) error {
	var loops []func(context.Context) error
	for _, job := range r.jobs {
		if job.Interval <= 0 {
			continue
		}
		m := mode
		if slices.Contains(checkOnly, job.Name) {
			m = Check
		}
		loops = append(loops, func(ctx context.Context) error {
			t := time.NewTicker(job.Interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
				rep, err := r.Run(ctx, job.Name, m, "schedule")
				switch {
				case err == nil, ctx.Err() != nil, rep.ID != 0: // a run that failed is logged by Run
				case errors.Is(err, ErrAlreadyRunning):
					r.log.DebugContext(ctx, "scheduled reconcile skipped: already running", "job", job.Name)
				default:
					r.log.ErrorContext(ctx, "scheduled reconcile could not start", "job", job.Name, "err", err)
				}
			}
		})
	}
	return loops
}
