// Command stockflow is the developer's handle on the whole system:
//
//	stockflow up       PostgreSQL + pinned NATS + the four services under a supervisor (restarts with backoff) + the console, logs in .run/logs
//	stockflow down     stop exactly what up started (-purge: and remove its database cluster and NATS store)
//	stockflow status   what runs, and how often the supervisor restarted each service
//	stockflow pg       ensure a PostgreSQL and print its URL (used by the test command)
//	stockflow token -role operator [-sub alice] [-ttl 1h]  a bearer token from the local identity provider
//	stockflow flashsale [flags]  run a flash sale against a running stockflow (any deployment, by URL)
//	stockflow demo [flags]       up, then how to try it by hand, then a flash sale with its report
//	stockflow loadtest [flags]   POST /v1/orders at a fixed rate (vegeta) on the running system, then its figures
//	stockflow dlq list|show|replay [flags]  the dead letters of the running system's consumers; replay through the inbox
//	stockflow streams check|apply [-replicas N]  compare the NATS streams with this build's configuration, or change them to it
//	stockflow chaos [-long] [-seed N]  a flash sale on a stockflow of its own while faults fire, then every invariant checked
//	stockflow compare [flags]    one flash sale on a single stock column, a Redis counter and the running stockflow, side by side
//
// DATABASE_URL and NATS_URL are used when set (and, for PostgreSQL, reachable); otherwise a
// throwaway cluster and the pinned nats-server run on ports 15432 and 14222, which do not clash
// with a machine's own servers, with their state in the git-ignored .run/ folder (as root, the
// cluster's data is outside the checkout: `stockflow status` says where).
// STOCKFLOW_PORT_OFFSET moves every port, for a second checkout beside the first. REPLICAS=2
// makes up run two processes of each service behind a round-robin front on its port.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/tools/launcher"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "stockflow:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: stockflow up|down|status|pg|token|flashsale|demo|loadtest|dlq|streams|chaos|compare")
	}
	if args[0] == "flashsale" {
		// Needs no repository: it drives any deployment through its public APIs.
		return flashSale(ctx, args[1:], getenv, stdout, stderr)
	}
	if args[0] == "streams" && getenv("NATS_URL") != "" {
		// Neither does a given NATS (the stockflow-tools image's nats-streams Job).
		return streams(ctx, launcher.Options{NATSURL: getenv("NATS_URL")}, args[1:], getenv, stdout, stderr)
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	offset, err := portOffset(getenv)
	if err != nil {
		return err
	}
	nodes, err := natsCluster(getenv)
	if err != nil {
		return err
	}
	syncInterval, err := natsSyncInterval(getenv)
	if err != nil {
		return err
	}
	replicas, err := serviceReplicas(getenv)
	if err != nil {
		return err
	}
	ports := map[string]int{}
	for svc, p := range launcher.DefaultPorts {
		ports[svc] = p + offset
	}
	o := launcher.Options{
		Root: root, RunDir: filepath.Join(root, ".run"),
		DatabaseURL: getenv("DATABASE_URL"), NATSURL: getenv("NATS_URL"), RedisURL: getenv("REDIS_URL"),
		PGPort: 15432 + offset, NATSPort: 14222 + offset, RedisPort: 16379 + offset, PaysimPort: 18083 + offset, ConsolePort: launcher.DefaultConsolePort + offset, Ports: ports,
		NATSNodes: nodes, NATSSync: syncInterval, Replicas: replicas,
		Env: []string{"PAYMENT_SANDBOX_SECRET=" + orDefault(getenv("PAYMENT_SANDBOX_SECRET"), "sandbox-secret"),
			"ORDER_MIN_PAYMENT_WINDOW=1s"}, // the demo's sale gives 15 s to pay, CI's 4 s
		Log: func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) },
	}
	switch args[0] {
	case "pg":
		url, err := launcher.EnsurePostgres(ctx, o)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, url)
		return nil
	case "up":
		sys, err := launcher.UpSupervised(ctx, o)
		if err != nil {
			return err
		}
		printUp(stdout, sys)
		return nil
	case "down":
		if len(args) > 1 && args[1] == "-purge" {
			if err := launcher.Purge(o); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "stockflow is down; its database cluster and NATS store are removed.")
			return nil
		}
		if err := launcher.Down(o); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "stockflow is down (make up again keeps its data; stockflow down -purge removes it).")
		return nil
	case "status":
		return launcher.Status(o, stdout)
	case "supervise": // run by up, not by hand
		if len(args) != 2 {
			return errors.New("usage: stockflow supervise <options file written by up>")
		}
		return launcher.Supervise(ctx, args[1], stderr)
	case "token":
		return token(o, args[1:], stdout, stderr)
	case "demo":
		return demo(ctx, o, args[1:], getenv, stdout, stderr)
	case "loadtest":
		return loadTest(ctx, o, args[1:], stdout, stderr)
	case "dlq":
		return dlq(ctx, o, args[1:], stdout, stderr)
	case "streams":
		return streams(ctx, o, args[1:], getenv, stdout, stderr)
	case "chaos":
		return chaosRun(ctx, root, nodes, args[1:], stdout, stderr)
	case "compare":
		return compareRun(ctx, o, args[1:], getenv, stdout, stderr)
	}
	return fmt.Errorf("unknown command %q (up, down, status, pg, token, flashsale, demo, loadtest, dlq, streams, chaos, compare)", args[0])
}

func printUp(w io.Writer, sys *launcher.System) {
	fmt.Fprintln(w, "stockflow is up:")
	for _, svc := range []string{"order", "stock", "payment-adapter", "timeout"} {
		line := sys.URLs[svc]
		if replicas := sys.Replicas(svc); len(replicas) > 1 {
			var own []string
			for _, name := range replicas {
				own = append(own, name+" "+sys.ProcessURL(name))
			}
			line += " (round robin over " + strings.Join(own, ", ") + ")"
		}
		fmt.Fprintf(w, "  %-16s %s\n", svc, line)
	}
	fmt.Fprintf(w, "  %-16s %s\n  %-16s %s\n  %-16s .run/logs/\n", "PostgreSQL", sys.DatabaseURL, "NATS", natsx.Redact(sys.NATSURL)+" (passwords in .run/nats/passwords.json)", "logs")
	gate := sys.RedisURL + " (the flash-sale gate; POST /v1/skus/{sku}/gate arms a SKU)"
	if sys.RedisURL == "" {
		gate = "off (no redis-server): every order takes the database path"
	}
	fmt.Fprintf(w, "  %-16s %s\n", "Redis", gate)
	fmt.Fprintf(w, "  %-16s %s (Stripe, WeChat Pay and Alipay stand-in; services/payment-adapter/README.md)\n", "paysim", sys.PaysimURL)
	fmt.Fprintf(w, "  %-16s %s/metrics (and the same path on each service; docs/observability.md)\n", "metrics", sys.URLs["stock"])
	if sys.ConsoleURL != "" {
		fmt.Fprintf(w, "  %-16s %s (open it in a browser and sign in with this operator+viewer token, valid 1 h;\n", "console", sys.ConsoleURL)
		fmt.Fprintf(w, "  %-16s `stockflow token -role approver -sub bob` mints a second person's)\n", "")
		if tok, err := sys.Token("console-ops", auth.Operator, auth.Viewer); err != nil {
			fmt.Fprintf(w, "  %-16s no sign-in token: %v\n", "", err)
		} else {
			fmt.Fprintf(w, "  %-16s %s\n", "sign-in token", tok)
		}
	}
}

// portOffset is STOCKFLOW_PORT_OFFSET: every port up uses (PostgreSQL, NATS, the services) is
// moved by it, so a second checkout on one machine runs beside the first.
func portOffset(getenv func(string) string) (int, error) {
	return envInt(getenv, "STOCKFLOW_PORT_OFFSET", 0, 0, 40000)
}

// serviceReplicas is REPLICAS: how many processes of each service up runs, 1 (the default)
// to 4, behind a round-robin front on the service's port when more than one.
func serviceReplicas(getenv func(string) string) (int, error) {
	return envInt(getenv, "REPLICAS", 1, 1, 4)
}

// envInt is the whole number from lo to hi in the environment variable name; def when unset.
func envInt(getenv func(string) string, name string, def, lo, hi int) (int, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q: want a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// token prints a bearer token signed by the local identity provider (RunDir/auth, made by up).
func token(o launcher.Options, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stockflow token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	roles := fs.String("role", "", "comma-separated roles: buyer, viewer, operator, approver, admin")
	sub := fs.String("sub", "", "subject (who acts; a buyer's buyer id); default: the first role's name")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rs []auth.Role
	for r := range strings.SplitSeq(*roles, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if !slices.Contains(auth.Roles, auth.Role(r)) || auth.Role(r) == auth.Service {
			return fmt.Errorf("token: unknown role %q (buyer, viewer, operator, approver, admin)", r)
		}
		rs = append(rs, auth.Role(r))
	}
	if len(rs) == 0 {
		return errors.New("token: -role is required, e.g. -role operator")
	}
	if *sub == "" {
		*sub = string(rs[0])
	}
	tok, err := launcher.Token(o, *sub, rs, *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// natsCluster is NATS_CLUSTER: how many nats-servers up starts, 1 (the default) or 3 (a
// JetStream cluster, streams with 3 replicas).
func natsCluster(getenv func(string) string) (int, error) {
	switch v := getenv("NATS_CLUSTER"); v {
	case "", "1":
		return 1, nil
	case "3":
		return 3, nil
	default:
		return 0, fmt.Errorf("NATS_CLUSTER=%q: 1 or 3 nodes", v)
	}
}

// natsSyncInterval is NATS_SYNC_INTERVAL: the JetStream sync_interval of the nats-servers up
// starts, "always" (the default: a message is on disk before its ack) or a Go duration such as
// nats-server's own default, 2m, to measure what always costs; an OS crash then loses the
// acknowledged messages of the last interval (review F6).
func natsSyncInterval(getenv func(string) string) (string, error) {
	v := getenv("NATS_SYNC_INTERVAL")
	if v == "" || v == "always" {
		return "always", nil
	}
	if d, err := time.ParseDuration(v); err != nil || d <= 0 {
		return "", fmt.Errorf("NATS_SYNC_INTERVAL=%q: always or a positive duration such as 2m", v)
	}
	return v, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository (go env GOWORK): %w", err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		return "", errors.New("run stockflow inside the repository (no go.work found)")
	}
	return filepath.Dir(work), nil
}
