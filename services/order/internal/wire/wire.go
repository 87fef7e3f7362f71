// Package wire assembles the order service from its parts for pkg/service (and for tests):
// the HTTP handler and the message consumers on one database pool.
package wire

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/postgres"
	pkgreconcile "github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/config"
	"github.com/stockflow/stockflow/services/order/internal/consumers"
	"github.com/stockflow/stockflow/services/order/internal/httpapi"
	orderpg "github.com/stockflow/stockflow/services/order/internal/postgres"
	"github.com/stockflow/stockflow/services/order/internal/reconcile"
)

// Schema is the order service's own migrations (pkg/service adds the outbox and inbox).
var Schema = orderpg.Schema

// Schemas are every migration the order database needs: the order tables, then the shared
// outbox and inbox tables.
func Schemas() []postgres.Schema { return orderpg.Schemas() }

// Build returns the order service on pool, a database with Schemas applied: the HTTP handler
// (the public order API plus GET /healthz, and GET /readyz answering ready()) and the
// consumers to run with natsx.Consume. It starts nothing but the goroutines that combine
// concurrent order creations (cfg.CombineMaxBatch). Orders are priced from the store's price
// list, with the payment windows and rate limits of cfg.Policy().
func Build(pool *pgxpool.Pool, log *slog.Logger, cfg config.Config, ready func(context.Context) error, v *auth.Verifier) (http.Handler, []service.Consumer) {
	p := build(pool, log, cfg, ready, v, &http.Client{Timeout: 5 * time.Second})
	return p.Handler, p.Consumers
}

// build assembles the parts; v checks the tokens of every route, peers calls stock.
func build(pool *pgxpool.Pool, log *slog.Logger, cfg config.Config, ready func(context.Context) error, v *auth.Verifier, peers *http.Client) service.Parts {
	store := orderpg.New(pool)
	var repo app.Repository = store
	if cfg.CombineMaxBatch > 1 {
		repo = app.Combine(store, combine.Options{MaxBatch: cfg.CombineMaxBatch})
	}
	g, _ := gate.New(cfg.Gate) // cfg is validated: the URL parses
	svc := app.New(repo, store, log, cfg.Policy(), app.WithGate(g), app.WithSoldOutTTL(cfg.GateSoldOutTTL), app.WithClock(cfg.Clock()))
	return service.Parts{
		Handler:   httpapi.Handler(svc, log, ready, v),
		Consumers: consumers.All(svc),
		Jobs:      []pkgreconcile.Job{reconcile.StuckOrders(svc, peers, cfg)},
	}
}

// Parts returns the service.Spec Wire function of the order service: Build on the
// dependencies pkg/service brings up, ready when both the database and NATS answer, plus the
// stuck-order reconciliation job.
func Parts(cfg config.Config) func(context.Context, service.Deps) (service.Parts, error) {
	return func(_ context.Context, d service.Deps) (service.Parts, error) {
		return build(d.Pool, d.Log, cfg, d.Ready, d.Auth, d.Peers), nil
	}
}
