// Package wire assembles the timeout service from its parts for whatever runs it
// (service.Main in cmd/timeout, tests): the admin HTTP handler, the message consumers and
// the sweeper loop on one database pool.
package wire

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stockflow/stockflow/pkg/auth"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/timeout/internal/app"
	"github.com/stockflow/stockflow/services/timeout/internal/config"
	"github.com/stockflow/stockflow/services/timeout/internal/consumers"
	"github.com/stockflow/stockflow/services/timeout/internal/httpapi"
	timeoutpg "github.com/stockflow/stockflow/services/timeout/internal/postgres"
)

// Schema is the timeout service's own migrations; service.Main adds the outbox and inbox ones.
var Schema = timeoutpg.Schema

// Schemas are all the migrations the timeout database needs (own, outbox, inbox), for tests.
func Schemas() []postgres.Schema { return timeoutpg.Schemas() }

// Parts returns the service.Spec Wire function of the timeout service: Build on the service's
// dependencies, with /readyz reporting the database and NATS.
func Parts(cfg config.Config) func(context.Context, service.Deps) (service.Parts, error) {
	return func(_ context.Context, d service.Deps) (service.Parts, error) {
		return Build(d.Pool, d.JS, d.Log, cfg, d.Ready, d.Auth), nil
	}
}

// Build returns the timeout service's parts on pool, a database with Schemas applied: the
// admin HTTP handler (ready when ready returns nil), the consumers to run with
// natsx.Consume, and the sweeper loop (every cfg.SweepInterval, until its context ends). js
// is used after commits only, to cancel the schedules of resolved orders. Build starts
// nothing.
func Build(pool *pgxpool.Pool, js jetstream.JetStream, log *slog.Logger, cfg config.Config, ready func(context.Context) error, v *auth.Verifier) service.Parts {
	cancel := func(ctx context.Context, orderID string) error { return natsx.CancelSchedule(ctx, js, orderID) }
	svc := app.New(timeoutpg.New(pool), cancel, log, cfg.SweepBatch, app.WithClock(cfg.Clock()),
		app.WithCombining(combine.Options{MaxBatch: cfg.CombineMaxBatch}))
	return service.Parts{
		Handler:   httpapi.Handler(svc, log, ready, v),
		Consumers: consumers.All(svc, cfg.CombineMaxBatch),
		Loops:     []func(context.Context) error{svc.Sweeper(cfg.SweepInterval)},
	}
}
