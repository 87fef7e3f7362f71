package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stockflow/stockflow/tools/launcher"
	"github.com/stockflow/stockflow/tools/loadtest"
	"github.com/stockflow/stockflow/tools/machine"
)

// loadTest is `stockflow loadtest`: vegeta against the running system's POST /v1/orders, then
// the report with this machine's CPU and PostgreSQL settings. The stock service's pid comes
// from the launcher's pid file, for its peak RSS; the CPU table measures every process up
// started (loadProcs). A failed correctness check exits 1; a missed target does not (the
// report says so).
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
	cfg.Procs = loadProcs(o)
	// The system is up, so this finds its server and starts nothing.
	dbURL, perr := launcher.EnsurePostgres(ctx, o)
	cfg.DatabaseURL = dbURL
	rep, err := loadtest.Run(ctx, cfg, stderr)
	if rep == nil {
		return err
	}
	fmt.Fprintln(stdout)
	machine.WriteHost(stdout)
	if perr != nil {
		fmt.Fprintln(stdout, "postgres: settings not read:", perr)
	} else if perr := machine.WritePostgres(ctx, stdout, dbURL); perr != nil {
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

// loadProcs are the processes whose CPU the load test measures, by the pid files up wrote
// in RunDir/pids: the four services (each one row, its replicas' times summed in: stock and
// stock-2 of REPLICAS=2 are "stock ×2"), each nats-server node, PostgreSQL with all its backends
// (the postmaster of the throwaway cluster's data directory), Redis and paysim when up
// started them, and the load generator itself. A server up did not start (DATABASE_URL or
// NATS_URL pointing elsewhere) is listed as not measured.
func loadProcs(o launcher.Options) []loadtest.Proc {
	pidFile := func(name string) string { return filepath.Join(o.RunDir, "pids", name+".pid") }
	var procs []loadtest.Proc
	for _, svc := range launcher.Services {
		procs = append(procs, loadtest.Proc{Name: svc, PID: loadtest.PIDFile(pidFile(svc)), Replicas: loadtest.ReplicaPIDFiles(pidFile(svc))})
	}
	files, _ := filepath.Glob(pidFile("nats*"))
	var nats []string // nats, nats-2, nats-3 (Glob sorts nats-2.pid before nats.pid)
	for _, f := range files {
		nats = append(nats, strings.TrimSuffix(filepath.Base(f), ".pid"))
	}
	slices.Sort(nats)
	for _, name := range nats {
		procs = append(procs, loadtest.Proc{Name: name, PID: loadtest.PIDFile(pidFile(name))})
	}
	if len(nats) == 0 {
		procs = append(procs, loadtest.Proc{Name: "nats", NotMeasured: "no nats-server of up's: NATS_URL is elsewhere"})
	}
	pg := loadtest.Proc{Name: "postgres (all)", Tree: true, NotMeasured: "no cluster of up's: DATABASE_URL is elsewhere"}
	if b, err := os.ReadFile(filepath.Join(o.RunDir, "pids", "pg.data")); err == nil {
		pg.PID, pg.NotMeasured = loadtest.PIDFile(filepath.Join(strings.TrimSpace(string(b)), "postmaster.pid")), ""
	}
	procs = append(procs, pg)
	for _, name := range []string{"redis", "paysim"} {
		if _, err := os.Stat(pidFile(name)); err == nil {
			procs = append(procs, loadtest.Proc{Name: name, PID: loadtest.PIDFile(pidFile(name))})
		}
	}
	return append(procs, loadtest.Proc{Name: "loadtest (this)", PID: loadtest.Self})
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
	cfg.Procs = loadProcs(o)
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
