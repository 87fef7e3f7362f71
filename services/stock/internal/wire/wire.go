// Package wire assembles the stock service from its parts for pkg/service: the HTTP handler,
// the message consumers and the reconciliation jobs, on one combining use-case service over
// the database pool.
package wire

import (
	"context"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/config"
	"github.com/stockflow/stockflow/services/stock/internal/consumers"
	"github.com/stockflow/stockflow/services/stock/internal/httpapi"
	stockpg "github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/reconcile"
)

// Schema is the stock service's own migrations (pkg/service adds the outbox and inbox).
var Schema = stockpg.Schema

// Parts returns the service.Spec Wire function of the stock service: the use cases over the
// store on the dependencies pkg/service brings up, their concurrent calls combined into
// batches as cfg says, on cfg.Clock (CLOCK_OFFSET), its gauges watching cfg.WatchSKUs and the
// locks overdue by more than cfg.OverdueLocksGrace; the HTTP API, ready when the database and NATS answer, with the
// storefront availability refreshed every cfg.AvailabilityTTL by a loop and the flash-sale
// gate routes (Redis at cfg.Gate); the consumers; and the reconciliation jobs, which ask
// order over d.Peers, with the gate job when there is a Redis.
func Parts(cfg config.Config) func(context.Context, service.Deps) (service.Parts, error) {
	return func(_ context.Context, d service.Deps) (service.Parts, error) {
		store := stockpg.NewStore(d.Pool)
		svc := app.NewCombining(store, combine.Options{MaxBatch: cfg.CombineMaxBatch, MaxWait: cfg.CombineWait, Flushers: cfg.CombineFlushers},
			app.WithWatchedSKUs(cfg.WatchSKUs...), app.WithOverdueGrace(cfg.OverdueLocksGrace), app.WithClock(cfg.Clock()))
		avail := app.NewAvailability(store, app.AvailabilityOptions{TTL: cfg.AvailabilityTTL, Low: cfg.AvailabilityLow, Log: d.Log})
		g, _ := gate.New(cfg.Gate) // cfg is validated: the URL parses
		gates := app.NewGates(store, g, cfg.GateOrphanAge)
		jobs := reconcile.Jobs(svc, cfg, d.Peers)
		if g != nil {
			jobs = append(jobs, reconcile.Gate(gates, cfg.GateInterval))
		}
		return service.Parts{
			Handler:   httpapi.Handler(svc, d.Log, d.Ready, d.Auth, httpapi.WithAvailability(avail), httpapi.WithGates(gates)),
			Consumers: consumers.All(svc),
			Loops:     []func(context.Context) error{avail.Run},
			Jobs:      jobs,
		}, nil
	}
}
