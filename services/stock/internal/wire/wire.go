// Package wire assembles the stock service from its parts for pkg/service: the HTTP handler,
// the message consumers and the reconciliation jobs, on one combining use-case service over
// the database pool.
package wire

import (
	"context"

	"github.com/stockflow/stockflow/pkg/combine"
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
// batches as cfg says, its gauges watching cfg.WatchSKUs and the locks overdue by more than
// cfg.OverdueLocksGrace; the HTTP API, ready when the database and NATS answer; the consumers;
// and the reconciliation jobs, which ask order over d.Peers.
func Parts(cfg config.Config) func(context.Context, service.Deps) (service.Parts, error) {
	return func(_ context.Context, d service.Deps) (service.Parts, error) {
		svc := app.NewCombining(stockpg.NewStore(d.Pool), combine.Options{MaxBatch: cfg.CombineMaxBatch, MaxWait: cfg.CombineWait, Flushers: cfg.CombineFlushers},
			app.WithWatchedSKUs(cfg.WatchSKUs...), app.WithOverdueGrace(cfg.OverdueLocksGrace))
		return service.Parts{
			Handler:   httpapi.Handler(svc, d.Log, d.Ready, d.Auth),
			Consumers: consumers.All(svc),
			Jobs:      reconcile.Jobs(svc, cfg, d.Peers),
		}, nil
	}
}
