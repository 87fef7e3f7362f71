package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/reconcile"
)

// newRunner returns the runner of the service's jobs plus the outbox-and-consumers job.
func newRunner(spec Spec, d Deps, parts Parts, relay *outbox.Relay) (*reconcile.Runner, error) {
	specs := make([]natsx.ConsumerSpec, len(parts.Consumers))
	for i, c := range parts.Consumers {
		specs[i] = c.Spec
	}
	b := spec.Base
	jobs := append(append([]reconcile.Job{}, parts.Jobs...), reconcile.OutboxJob(d.Pool, d.JS, reconcile.OutboxOptions{
		Interval: b.ReconcileOutboxInterval, Age: b.ReconcileOutboxAge, LagMax: b.ReconcileLagMax,
		Consumers: specs, Publish: relay.PublishPending,
	}))
	r, err := reconcile.NewRunner(d.Pool, d.Log, jobs...)
	if err != nil {
		return nil, fmt.Errorf("wire %s: %w", spec.Name, err)
	}
	return r, nil
}

// reconcileCommand is `<service> reconcile <job|all> [--repair]`: it runs the job (every job,
// one after the other, for all) once in check mode, or repair mode with --repair, and prints
// each report as JSON (an array for all). It needs the database and NATS, not the HTTP port.
func reconcileCommand(ctx context.Context, spec Spec, log *slog.Logger, args []string, stdout io.Writer) error {
	mode, name := reconcile.Check, ""
	for _, a := range args {
		switch a {
		case "--repair", "-repair":
			mode = reconcile.Repair
		case "--check", "-check":
			mode = reconcile.Check
		default:
			if name != "" {
				return fmt.Errorf("reconcile: one job at a time (or all), got %q and %q", name, a)
			}
			name = a
		}
	}
	pool, err := openDB(ctx, spec, false)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, js, err := natsx.Connect(ctx, spec.Base.NATSURL, spec.Name+"-reconcile")
	if err != nil {
		return err
	}
	defer nc.Close()
	d := Deps{Pool: pool, NC: nc, JS: js, Log: log}
	parts, err := spec.Wire(ctx, d)
	if err != nil {
		return fmt.Errorf("wire %s: %w", spec.Name, err)
	}
	relay := outbox.NewRelay(pool, js, outbox.RelayOptions{BatchSize: spec.Base.RelayBatch, Logger: log})
	runner, err := newRunner(spec, d, parts, relay)
	if err != nil {
		return err
	}
	var names []string
	for _, j := range runner.Jobs() {
		names = append(names, j.Name)
	}
	if name == "" {
		return fmt.Errorf("reconcile: name a job (%v) or all", names)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if name != "all" {
		rep, err := runner.Run(ctx, name, mode, "cli")
		if rep.ID != 0 {
			if werr := enc.Encode(rep); werr != nil {
				return errors.Join(err, werr)
			}
		}
		return err
	}
	var reps []reconcile.Report
	var errs []error
	for _, n := range names {
		rep, err := runner.Run(ctx, n, mode, "cli")
		if rep.ID != 0 {
			reps = append(reps, rep)
		}
		errs = append(errs, err)
	}
	return errors.Join(append(errs, enc.Encode(reps))...)
}
