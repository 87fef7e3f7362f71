// Command console runs the operations console: a browser app served from the binary (no CDN,
// works offline) and a thin backend that calls the four services' public APIs with the
// signed-in person's token. It has no database, broker or key of its own (decision 0007).
//
//	console [serve]            run the console (default)
//	console version|--version  print the build (pkg/buildinfo)
//	console env                list every environment variable the configuration reads, as the
//	                           services' env does (what a deployment must give a source)
//
// Configuration comes from the environment (see internal/config).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/stockflow/stockflow/pkg/buildinfo"
	"github.com/stockflow/stockflow/pkg/envtag"
	"github.com/stockflow/stockflow/services/console/internal/config"
	"github.com/stockflow/stockflow/services/console/internal/httpapi"
	"github.com/stockflow/stockflow/services/console/internal/live"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "console:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args, environ []string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "serve":
		return serve(ctx, environ, stdout)
	case "version", "--version":
		_, err := fmt.Fprintln(stdout, "console", buildinfo.Get())
		return err
	case "env":
		// The tags alone: env needs no valid configuration, so a deployment check lists the
		// variables without providing them.
		return envtag.Write(stdout, config.Config{})
	}
	return fmt.Errorf("unknown command %q (serve, version, env)", cmd)
}

func serve(ctx context.Context, environ []string, stdout io.Writer) error {
	cfg, err := config.Load(environ)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel}))
	client := &http.Client{Timeout: cfg.UpstreamTimeout}
	hub := live.New(httpapi.StockFetch(client, cfg.StockURL), cfg.LiveInterval)
	srv := &http.Server{
		Handler:           httpapi.Handler(cfg.Services(), client, hub, cfg.CompareReport, log),
		ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: 64 << 10,
		ReadTimeout: 10 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 60 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	l, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return err
	}
	log.Info("console listening", "config", cfg)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	log.Info("console stopped")
	return nil
}
