// Command payment-adapter runs the payment adapter: the providers' payment callbacks, the
// payment read API, and the consumers that keep order totals and refund payments.
//
//	payment-adapter [serve]   run the service (default)
//	payment-adapter migrate   create the database if needed, apply migrations, exit
//
// Configuration comes from the environment (see internal/config).
package main

import (
	"context"
	"io"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/wire"
)

func main() { service.Command("payment-adapter", run) }

func run(ctx context.Context, args, environ []string, stdout io.Writer) error {
	cfg, err := config.Load(environ)
	if err != nil && !service.Describes(args) {
		return err
	}
	return service.Main(ctx, args, stdout, service.Spec{
		Name:    "payment-adapter",
		Base:    &cfg.Base,
		Config:  cfg,
		Schemas: []postgres.Schema{wire.Schema},
		Wire:    wire.Parts(cfg),
	})
}
