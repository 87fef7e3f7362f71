package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stockflow/stockflow/tools/chaos"
)

// chaosRun is `stockflow chaos`: a flash sale on a stockflow of its own (.run/chaos) while
// faults fire, then every invariant checked; non-zero exit when one fails.
func chaosRun(ctx context.Context, root string, nodes int, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stockflow chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := chaos.Config{Root: root, RunDir: filepath.Join(root, ".run", "chaos"), NATSNodes: nodes, Progress: stderr}
	fs.BoolVar(&cfg.Long, "long", false, "the long form (about 15 minutes): a 5-minute PostgreSQL outage, every service killed three times")
	fs.IntVar(&cfg.NATSNodes, "nats-cluster", nodes, "1, or 3: a JetStream cluster, one node and the STOCK leader killed (env NATS_CLUSTER)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "the schedule's and the buyers' randomness (0: random; the report prints it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.NATSNodes != 1 && cfg.NATSNodes != 3 {
		return fmt.Errorf("chaos: -nats-cluster %d: 1 or 3", cfg.NATSNodes)
	}
	// Each run starts with fresh logs (kept for reading afterwards); chaos.Run clears the
	// database cluster and the NATS store, and the binaries are rebuilt only when stale.
	if err := os.RemoveAll(filepath.Join(cfg.RunDir, "logs")); err != nil {
		return err
	}
	rep, err := chaos.Run(ctx, cfg)
	if rep != nil {
		if werr := rep.WriteText(stdout); werr != nil {
			return werr
		}
		fmt.Fprintf(stdout, "logs: %s\n", filepath.Join(cfg.RunDir, "logs"))
	}
	return err
}
