package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stockflow/stockflow/tools/launcher"
	"github.com/stockflow/stockflow/tools/loadtest"
	"github.com/stockflow/stockflow/tools/machine"
)

// loadTest is `stockflow loadtest`: vegeta against the running system's POST /v1/orders, then
// the report with this machine's CPU and PostgreSQL settings. The stock service's pid comes
// from the launcher's pid file, for its peak RSS. A failed correctness check exits 1; a missed
// target does not (the report says so).
func loadTest(ctx context.Context, o launcher.Options, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "storm" {
		return stormTest(ctx, o, args[1:], stdout, stderr)
	}
	cfg := loadtest.Default()
	cfg.OrderURL, cfg.StockURL = serviceURL(o, "order"), serviceURL(o, "stock")
	fs := flag.NewFlagSet("stockflow loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("loadtest: unexpected arguments %q", fs.Args())
	}
	if cfg.StockPID == 0 {
		if b, err := os.ReadFile(filepath.Join(o.RunDir, "pids", "stock.pid")); err == nil {
			cfg.StockPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	signer, err := launcher.Signer(o)
	if err != nil {
		return err
	}
	cfg.Signer = signer
	rep, err := loadtest.Run(ctx, cfg, stderr)
	if rep == nil {
		return err
	}
	fmt.Fprintln(stdout)
	machine.WriteHost(stdout)
	// The system is up, so this finds its server and starts nothing.
	if url, perr := launcher.EnsurePostgres(ctx, o); perr != nil {
		fmt.Fprintln(stdout, "postgres: settings not read:", perr)
	} else if perr := machine.WritePostgres(ctx, stdout, url); perr != nil {
		fmt.Fprintln(stdout, "postgres:", perr)
	}
	if werr := rep.WriteText(stdout); werr != nil {
		return werr
	}
	if err == nil && rep.Failed() {
		err = errors.New("loadtest: a correctness check failed")
	}
	return err
}

// stormTest is `stockflow loadtest storm`: the sold-out storm, gate off then on, against the
// running system. A failed correctness check exits 1; a missed target does not.
func stormTest(ctx context.Context, o launcher.Options, args []string, stdout, stderr io.Writer) error {
	cfg := loadtest.DefaultStorm()
	cfg.OrderURL, cfg.StockURL = serviceURL(o, "order"), serviceURL(o, "stock")
	fs := flag.NewFlagSet("stockflow loadtest storm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("loadtest storm: unexpected arguments %q", fs.Args())
	}
	signer, err := launcher.Signer(o)
	if err != nil {
		return err
	}
	cfg.Signer = signer
	// The system is up, so this finds its server and starts nothing.
	if cfg.DatabaseURL, err = launcher.EnsurePostgres(ctx, o); err != nil {
		return err
	}
	rep, err := loadtest.Storm(ctx, cfg, stderr)
	if rep == nil {
		return err
	}
	machine.WriteHost(stdout)
	if werr := rep.WriteText(stdout); werr != nil {
		return werr
	}
	if err == nil && rep.Failed() {
		err = errors.New("loadtest storm: a correctness check failed")
	}
	return err
}

// serviceURL is where up runs svc: its port moved by STOCKFLOW_PORT_OFFSET, as in o.Ports
// (the -order-url and -stock-url defaults; loadtest's own are the unmoved ports).
func serviceURL(o launcher.Options, svc string) string {
	return fmt.Sprintf("http://127.0.0.1:%d", o.Ports[svc])
}
