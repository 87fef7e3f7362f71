// Command order runs the order service: the public order API and the consumers that move
// orders as stock and payment outcomes arrive. Subcommands: serve (default) and migrate.
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
	"github.com/stockflow/stockflow/services/order/internal/config"
	"github.com/stockflow/stockflow/services/order/internal/wire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "order:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args, environ []string, stdout io.Writer) error {
	cfg, err := config.Load(environ)
	if err != nil {
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
