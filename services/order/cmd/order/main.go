// Command order runs the order service: the public order API and the consumers that move
// orders as stock and payment outcomes arrive. Subcommands: serve (default) and migrate.
// Configuration comes from the environment (see internal/config).
package main

import (
	"context"
	"io"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/order/internal/config"
	"github.com/stockflow/stockflow/services/order/internal/wire"
)

func main() { service.Command("order", run) }

func run(ctx context.Context, args, environ []string, stdout io.Writer) error {
	cfg, err := config.Load(environ)
	if err != nil && !service.Describes(args) {
		return err
	}
	return service.Main(ctx, args, stdout, service.Spec{
		Name:    "order",
		Base:    &cfg.Base,
		Config:  cfg,
		Schemas: []postgres.Schema{wire.Schema},
		Wire:    wire.Parts(cfg),
	})
}
