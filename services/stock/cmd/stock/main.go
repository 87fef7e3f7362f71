// Command stock runs the stock service: SKU quantities, locks, the ledger, and the consumers
// that lock, sell and release stock for orders. Subcommands: serve (default), migrate, verify
// (fold the ledger, compare with the summaries, exit 1 on any difference), rebuild
// (recompute the summaries from the ledger) and reconcile <job|all> [--repair] (the
// reconciliation jobs: overdue_locks, orphan_locks, ledger_summary, outbox).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/config"
	"github.com/stockflow/stockflow/services/stock/internal/httpapi"
	stockpg "github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/wire"
)

func main() { service.Command("stock", run) }

func run(ctx context.Context, args, environ []string, stdout io.Writer) error {
	cfg, err := config.Load(environ)
	if err != nil && !service.Describes(args) {
		return err
	}
	return service.Main(ctx, args, stdout, service.Spec{
		Name:    "stock",
		Base:    &cfg.Base,
		Config:  cfg,
		Schemas: []postgres.Schema{wire.Schema},
		Wire:    wire.Parts(cfg),
		Commands: map[string]func(context.Context, *pgxpool.Pool, io.Writer) error{
			"verify":  verify,
			"rebuild": rebuild,
		},
	})
}

func verify(ctx context.Context, pool *pgxpool.Pool, stdout io.Writer) error {
	diffs, err := stockpg.NewStore(pool).Verify(ctx)
	if err != nil {
		return err
	}
	if err := writeJSON(stdout, httpapi.VerifyReport{Consistent: len(diffs) == 0, Differences: diffs}); err != nil {
		return err
	}
	if len(diffs) > 0 {
		return fmt.Errorf("verify: %d differences between the summaries and the ledger", len(diffs))
	}
	return nil
}

func rebuild(ctx context.Context, pool *pgxpool.Pool, stdout io.Writer) error {
	changed, err := stockpg.NewStore(pool).Rebuild(ctx)
	if err != nil {
		return err
	}
	return writeJSON(stdout, map[string]any{"rebuilt": changed})
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
