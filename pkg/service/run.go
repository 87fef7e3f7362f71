package service

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
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/buildinfo"
	"github.com/stockflow/stockflow/pkg/deadletter"
	"github.com/stockflow/stockflow/pkg/envtag"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/reconcile"
	"github.com/stockflow/stockflow/pkg/telemetry"
)

// Deps are the connections a service's parts are built on.
type Deps struct {
	Pool *pgxpool.Pool
	NC   *nats.Conn
	JS   jetstream.JetStream
	Log  *slog.Logger
	Auth *auth.Verifier // checks the bearer token of every route
	// Peers is the HTTP client of calls to other services: each carries a service token
	// signed with AUTH_SERVICE_KEY (without one, calls go without and are refused).
	Peers *http.Client
}

// Consumer is one durable consumer of the service and its handler.
type Consumer struct {
	Spec   natsx.ConsumerSpec
	Handle natsx.Handler
}

// Parts are what a service contributes: its API, its consumers, its background loops
// (sweepers, schedulers), each loop running until its context ends, and its reconciliation
// jobs (pkg/service adds the outbox-and-consumers job every service has, serves them under
// /v1/admin/reconcile, runs them on their schedules and as the reconcile subcommand).
type Parts struct {
	Handler   http.Handler
	Consumers []Consumer
	Loops     []func(context.Context) error
	Jobs      []reconcile.Job
}

// Spec describes one service to Main.
type Spec struct {
	Name    string
	Base    *Base             // the embedded Base of Config, after LoadConfig
	Config  any               // the whole config, for the startup log
	Schemas []postgres.Schema // the service's own migrations; outbox and inbox are added
	// Wire builds the service's parts once its dependencies are up.
	Wire func(ctx context.Context, d Deps) (Parts, error)
	// Commands are extra subcommands (stock: verify, rebuild) run with the database only.
	Commands map[string]func(ctx context.Context, pool *pgxpool.Pool, stdout io.Writer) error
}

// Describes reports whether args ask only what the binary is (version, --version, env): a
// service's main runs those even when its configuration is invalid, so a deployment check can
// list a service's variables without providing them.
func Describes(args []string) bool {
	return len(args) > 0 && (args[0] == "version" || args[0] == "--version" || args[0] == "env")
}

// Main runs the subcommand in args: serve (the default), migrate, reconcile <job|all>
// [--repair] (print the JSON report of each run; exit 1 when a run fails), one of
// spec.Commands, version (or --version: the build, buildinfo) or env (every environment
// variable the service reads, with its default; what a deployment must provide a source for).
func Main(ctx context.Context, args []string, stdout io.Writer, spec Spec) error {
	if Describes(args) {
		if args[0] == "env" {
			return envtag.Write(stdout, spec.Config)
		}
		_, err := fmt.Fprintln(stdout, spec.Name, buildinfo.Get())
		return err
	}
	// JSON lines; those logged with a request's or a message's context carry its trace_id and
	// span_id (telemetry.LogHandler).
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: spec.Base.LogLevel}))).With("service", spec.Name)
	if err := spec.Base.Validate(); err != nil {
		return err
	}
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "serve":
		log.Info("starting", LogAttrs(spec.Config)...)
		return serve(ctx, spec, log)
	case "migrate":
		pool, err := openDB(ctx, spec, true)
		if err != nil {
			return err
		}
		pool.Close()
		fmt.Fprintf(stdout, "%s: migrations applied\n", spec.Name)
		return nil
	case "reconcile":
		return reconcileCommand(ctx, spec, log, args[1:], stdout)
	}
	run, ok := spec.Commands[cmd]
	if !ok {
		return fmt.Errorf("unknown command %q (serve, migrate, reconcile%s, version, env)", cmd, commandNames(spec.Commands))
	}
	pool, err := openDB(ctx, spec, false)
	if err != nil {
		return err
	}
	defer pool.Close()
	return run(ctx, pool, stdout)
}

func commandNames(cmds map[string]func(context.Context, *pgxpool.Pool, io.Writer) error) string {
	s := ""
	for name := range cmds {
		s += ", " + name
	}
	return s
}

// Schemas returns the service's schemas with the shared outbox, inbox, reconcile and
// dead-letter replay schemas.
func Schemas(own ...postgres.Schema) []postgres.Schema {
	return append(append([]postgres.Schema{}, own...), outbox.Schema, inbox.Schema, reconcile.Schema, deadletter.Schema)
}

func openDB(ctx context.Context, spec Spec, migrate bool) (*pgxpool.Pool, error) {
	if migrate {
		if err := postgres.EnsureDatabase(ctx, spec.Base.DatabaseURL); err != nil {
			return nil, err
		}
	}
	pool, err := postgres.Connect(ctx, spec.Base.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := postgres.Migrate(ctx, pool, Schemas(spec.Schemas...)...); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return pool, nil
}

// serve runs until ctx ends, then shuts down in order: stop taking HTTP requests and
// messages, let in-flight handlers finish, stop the relay, close the connections.
func serve(ctx context.Context, spec Spec, log *slog.Logger) error {
	shutdownTracing, err := telemetry.Setup(ctx, spec.Name, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err := shutdownTracing(context.WithoutCancel(ctx)); err != nil {
			log.Warn("tracing shutdown", "err", err)
		}
	}()
	metrics, shutdownMetrics, err := telemetry.SetupMetrics(ctx, spec.Name)
	if err != nil {
		return err
	}
	defer func() {
		if err := shutdownMetrics(context.WithoutCancel(ctx)); err != nil {
			log.Warn("metrics shutdown", "err", err)
		}
	}()

	pool, err := openDB(ctx, spec, spec.Base.AutoMigrate)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, js, err := natsx.Connect(ctx, spec.Base.NATSURL, spec.Name)
	if err != nil {
		return err
	}
	defer nc.Close()
	drifts, err := natsx.PrepareStreams(ctx, nc, js, spec.Base.NATSStreamReplicas)
	if err != nil {
		return err
	}
	for _, d := range drifts {
		log.Warn("stream configuration differs from this build's; it is left as it is until `stockflow streams apply` (the nats-streams Job) changes it", "drift", d)
	}
	verifier, err := auth.NewVerifier(ctx, spec.Base.AuthConfig())
	if err != nil {
		return err
	}
	peers := &http.Client{Timeout: 5 * time.Second}
	if spec.Base.AuthServiceKey != "" {
		signer, err := auth.LoadSigner(spec.Base.AuthServiceKey, spec.Base.AuthIssuer, spec.Base.AuthAudience)
		if err != nil {
			return err
		}
		peers = signer.Client(5 * time.Second)
	}
	deps := Deps{Pool: pool, NC: nc, JS: js, Log: log, Auth: verifier, Peers: peers}
	parts, err := spec.Wire(ctx, deps)
	if err != nil {
		return fmt.Errorf("wire %s: %w", spec.Name, err)
	}

	relay := outbox.NewRelay(pool, js, outbox.RelayOptions{BatchSize: spec.Base.RelayBatch, Logger: log})
	runner, err := newRunner(spec, deps, parts, relay)
	if err != nil {
		return err
	}
	parts.Loops = append(parts.Loops, runner.Loops(reconcile.Mode(spec.Base.ReconcileMode), spec.Base.ReconcileCheckOnly)...)
	if spec.Base.InboxRetention > 0 { // every service's database has the inbox (Schemas)
		parts.Loops = append(parts.Loops, pruneInbox(pool, spec.Base.InboxRetention, inboxPruneEvery, log))
	}

	if spec.Base.PprofAddr != "" {
		prof, err := servePprof(spec.Base.PprofAddr, log)
		if err != nil {
			return err
		}
		defer func() {
			if err := prof.Close(); err != nil {
				log.Warn("pprof close", "err", err)
			}
		}()
	}
	lis, err := net.Listen("tcp", spec.Base.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", spec.Base.HTTPAddr, err)
	}
	handler := reconcile.Mount(parts.Handler, runner, log, verifier)
	// Dead letters of the service's own consumers, replayed through their handlers (decision 0006).
	replay := map[string]natsx.Handler{}
	for _, c := range parts.Consumers {
		replay[c.Spec.Durable] = c.Handle
	}
	handler = deadletter.Mount(handler, deadletter.New(pool, js, replay, log), log, verifier)
	// Every phase of a request is bounded, so slow or idle clients cannot hold connections:
	// headers 5 s, the whole body 10 s, the answer 60 s, an idle keep-alive 60 s, headers 64 KiB.
	srv := &http.Server{
		Handler:           withMetrics(metrics, telemetry.HTTPHandler(handler, spec.Name)),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10,
	}

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	var wg sync.WaitGroup
	errc := make(chan error, 2+len(parts.Loops))
	report := func(err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			errc <- err
		}
	}
	wg.Go(func() { report(relay.Run(bg)) })
	for _, loop := range parts.Loops {
		wg.Go(func() { report(loop(bg)) })
	}
	var stops []func()
	for _, c := range parts.Consumers {
		if c.Spec.AckWait == 0 {
			c.Spec.AckWait = spec.Base.ConsumerAckWait
		}
		if c.Spec.Workers == 0 {
			c.Spec.Workers = spec.Base.ConsumerWorkers
		}
		stop, err := natsx.Consume(bg, js, c.Spec, outageAware(c.Handle), log)
		if err != nil {
			for _, s := range stops {
				s()
			}
			return fmt.Errorf("consume %s: %w", c.Spec.Durable, err)
		}
		stops = append(stops, stop)
	}
	wg.Go(func() {
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	})
	log.Info("ready", "http", lis.Addr().String(), "consumers", len(parts.Consumers))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spec.Base.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("http shutdown: %w", err))
	}
	for _, s := range stops {
		s() // waits for in-flight handlers: their transactions commit or roll back
	}
	stopBG()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		runErr = errors.Join(runErr, errors.New("background work did not stop in time"))
	}
	if err := nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		log.Warn("nats drain", "err", err)
	}
	return runErr
}

// outageAware marks h's errors that say the database could not be used (postgres.IsUnavailable)
// natsx.Unavailable: such a message is retried for as long as the outage lasts, within
// natsx.DefaultOutageMaxDeliver, instead of being dead-lettered after MaxDeliver.
func outageAware(h natsx.Handler) natsx.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		err := h(ctx, msg)
		if err != nil && !natsx.IsPermanent(err) && postgres.IsUnavailable(err) {
			return natsx.Unavailable(err)
		}
		return err
	}
}

// Ready reports whether the database and NATS answer: the body of /readyz.
func (d Deps) Ready(ctx context.Context) error {
	if err := d.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if !d.NC.IsConnected() {
		return fmt.Errorf("nats: %s", d.NC.Status())
	}
	return nil
}

// Command is a service's main: it runs run with a context that SIGINT or SIGTERM cancels, and
// exits 1 with the error, prefixed by name, when run fails.
func Command(name string, run func(ctx context.Context, args, environ []string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
