// Command benchreport turns `go test -bench 'LockHotSKU|LockZipf'` output into the report issue 5
// asks for: the raw lines as they arrive, then the machine (nproc, CPU model, the PostgreSQL
// settings of DATABASE_URL), a benchstat table of locks/s and p99-ms (old = naive, new =
// engine, each ± its variation) and one engine/naive throughput ratio per clients value with
// its spread: the lowest and highest of the rounds' own ratios and each side's range.
//
//	go test -run '^$' -bench 'LockHotSKU|LockZipf' ./services/stock/internal/app/ | benchreport
//	benchreport < .run/bench.txt    # again, from a saved run
//
// It exits 1 when a ratio the issue asks for has no results on one side, or the PostgreSQL
// settings cannot be read: a report without them is not a result.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/stockflow/stockflow/tools/machine"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdin, os.Stdout, os.Stderr, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	results, err := parse(io.TeeReader(stdin, stdout), stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	machine.WriteHost(stdout)
	var errs []error
	if url := getenv("DATABASE_URL"); url == "" {
		errs = append(errs, errors.New("DATABASE_URL is not set: PostgreSQL settings not recorded"))
	} else if err := machine.WritePostgres(ctx, stdout, url); err != nil {
		errs = append(errs, err)
	}
	fmt.Fprintln(stdout)
	writeTable(stdout, results)
	fmt.Fprintln(stdout)
	rs, missing := ratios(results), 0
	for _, r := range rs {
		fmt.Fprintln(stdout, r)
		if r.err != nil {
			missing++
		}
	}
	if missing > 0 {
		errs = append(errs, fmt.Errorf("%d of %d engine/naive ratios have no results", missing, len(rs)))
	}
	return errors.Join(errs...)
}
