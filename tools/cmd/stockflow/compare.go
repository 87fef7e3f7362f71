package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/stockflow/stockflow/tools/compare"
	"github.com/stockflow/stockflow/tools/flashsale"
	"github.com/stockflow/stockflow/tools/launcher"
)

// compareRun is `stockflow compare`: the same flash sale on a single stock column, a Redis
// counter and the running stockflow, side by side; the table on stdout, the JSON report in
// -out as it goes. It uses the stockflow `make up` runs, and brings it up as `make up` does
// when nothing answers (it stays up: `make down`). Non-zero exit when a design could not be
// run, or when stockflow oversold, left units stuck or sold other than its paid orders.
func compareRun(ctx context.Context, o launcher.Options, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := compare.Default()
	cfg.Out = o.CompareReport() // where make up's console reads it
	fs := flag.NewFlagSet("stockflow compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("compare: unexpected arguments %q", fs.Args())
	}
	cfg.OrderURL, cfg.StockURL, cfg.PaymentURL = serviceURL(o, "order"), serviceURL(o, "stock"), serviceURL(o, "payment-adapter")
	cfg.SandboxSecret = flashsale.EnvSecret(getenv) // as up hands it to the services
	if ready(ctx, cfg.OrderURL) {
		// The system is up, so these find its servers and start nothing.
		var err error
		if cfg.DatabaseURL, err = launcher.EnsurePostgres(ctx, o); err != nil {
			return err
		}
		cfg.RedisURL = o.RedisURL
		if cfg.RedisURL == "" || cfg.RedisURL == "off" {
			cfg.RedisURL = fmt.Sprintf("redis://127.0.0.1:%d/0", o.RedisPort)
		}
	} else {
		fmt.Fprintln(stderr, "compare: stockflow does not answer at", cfg.OrderURL, "— bringing it up as `make up` does (it stays up: `make down`)")
		sys, err := launcher.UpSupervised(ctx, o)
		if err != nil {
			return err
		}
		cfg.DatabaseURL, cfg.RedisURL = sys.DatabaseURL, sys.RedisURL
		if cfg.RedisURL == "" {
			return fmt.Errorf("compare: the redis-only design needs a Redis and up has none (install redis-server, or set REDIS_URL)")
		}
	}
	signer, err := launcher.Signer(o)
	if err != nil {
		return err
	}
	cfg.Signer = signer
	fmt.Fprintf(stderr, "compare: the report is rewritten every 250 ms in %s\n", cfg.Out)
	rep, err := compare.Run(ctx, cfg, stderr)
	if rep != nil {
		fmt.Fprintln(stdout)
		if werr := rep.WriteText(stdout); werr != nil {
			return werr
		}
		fmt.Fprintf(stdout, "report: %s\n", cfg.Out)
	}
	return err
}

// ready reports whether a service's /readyz answers 200.
func ready(ctx context.Context, base string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
