// Command timeout runs the timeout service: it keeps every locked order's payment deadline,
// schedules a JetStream message that fires at it, and emits timeout.expired when the deadline
// passes before stock sold or released the order; a sweeper catches what a lost message
// missed. Its HTTP API is health and admin only.
//
//	timeout [serve]   run the service (default)
//	timeout migrate   create the database if needed, apply migrations, exit
//
// Configuration comes from the environment (see internal/config).
package main

import (
	"context"
	"io"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/timeout/internal/config"
	"github.com/stockflow/stockflow/services/timeout/internal/wire"
)

func main() { service.Command("timeout", run) }

func run(ctx context.Context, args, environ []string, stdout io.Writer) error {
	cfg, err := config.Load(environ)
	if err != nil && !service.Describes(args) {
		return err
	}
	return service.Main(ctx, args, stdout, service.Spec{
		Name:    "timeout",
		Base:    &cfg.Base,
		Config:  cfg,
		Schemas: []postgres.Schema{wire.Schema},
		Wire:    wire.Parts(cfg),
	})
}
