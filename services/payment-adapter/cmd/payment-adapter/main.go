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
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/wire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "payment-adapter:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args, environ []string, stdout io.Writer) error {
	cfg, err := config.Load(environ)
	if err != nil {
		return err
	}
	return service.Main(ctx, args, stdout, service.Spec{
		Name:    "payment-adapter",
		Base:    &cfg.Base,
		Config:  cfg,
		Schemas: []postgres.Schema{wire.Schema},
		Wire:    wire.Wire(cfg),
	})
}
