// Package wire assembles payment-adapter from its parts for whatever runs it (service.Main in
// cmd/payment-adapter, tests): the HTTP handler and the message consumers on one database
// pool.
package wire

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/combine"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/app"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/consumers"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/httpapi"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	paymentpg "github.com/stockflow/stockflow/services/payment-adapter/internal/postgres"
	paymentreconcile "github.com/stockflow/stockflow/services/payment-adapter/internal/reconcile"
)

// Schema is payment-adapter's own migrations; service.Main adds the outbox and inbox ones.
var Schema = paymentpg.Schema

// Schemas are all the migrations the payment database needs (own, outbox, inbox), for tests.
func Schemas() []postgres.Schema { return paymentpg.Schemas() }

// Parts returns the service.Spec Wire function of payment-adapter: Build on the service's
// dependencies, with /readyz reporting the database and NATS.
func Parts(cfg config.Config) func(context.Context, service.Deps) (service.Parts, error) {
	return func(_ context.Context, d service.Deps) (service.Parts, error) {
		return Build(d.Pool, d.Log, cfg, d.Ready, d.Auth, d.Peers)
	}
}

// Build returns payment-adapter's parts on pool, a database with Schemas applied: the HTTP
// handler (callbacks of every configured provider at POST /v1/callbacks/{provider} — the
// sandbox, and Stripe, WeChat Pay and Alipay when configured — the payment read API, GET
// /healthz and GET /readyz, ready when ready returns nil), the consumers to run with
// natsx.Consume and the reconciliation jobs paid_not_sold, unconfirmed_refunds and
// lost_callbacks. payment-adapter needs no JetStream handle (it publishes only through the
// outbox) and no background loops. Build starts nothing and fails only on a bad cfg.
func Build(pool *pgxpool.Pool, log *slog.Logger, cfg config.Config, ready func(context.Context) error, v *auth.Verifier, peers *http.Client) (service.Parts, error) {
	ps, err := cfg.Providers()
	if err != nil {
		return service.Parts{}, fmt.Errorf("wire payment-adapter: %w", err)
	}
	providers, err := payment.NewRegistry(ps...)
	if err != nil {
		return service.Parts{}, fmt.Errorf("wire payment-adapter: %w", err)
	}
	log.Info("payment providers", "providers", providers.Names(), "queried_for_lost_callbacks", providers.Queriers())
	svc := app.New(paymentpg.New(pool), providers, log, app.WithClock(cfg.Clock()),
		app.WithCombining(combine.Options{MaxBatch: cfg.CombineMaxBatch}))
	return service.Parts{
		Handler:   httpapi.Handler(svc, log, ready, v),
		Consumers: consumers.All(svc, cfg.CombineMaxBatch),
		Jobs: []reconcile.Job{
			paymentreconcile.PaidNotSold(svc, peers, cfg),
			paymentreconcile.UnconfirmedRefunds(svc, cfg),
			paymentreconcile.LostCallbacks(svc, cfg),
		},
	}, nil
}
