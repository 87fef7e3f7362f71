// Package service runs a stockflow service process: configuration from the environment, its
// database and migrations, NATS JetStream with the streams, the outbox relay, the consumers, the
// pruning of their inbox claims, the HTTP server, and a graceful shutdown in the right order.
// Services bring only their parts.
package service

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/envtag"
	"github.com/stockflow/stockflow/pkg/natsx"
)

// Base is the configuration every service shares. A service embeds it in its own Config and
// fills in its own defaults (listen address, database) with Default after LoadConfig.
type Base struct {
	// HTTPAddr is where the HTTP API, /healthz and /readyz listen.
	HTTPAddr string `env:"HTTP_ADDR"`
	// DatabaseURL is the service's own PostgreSQL database.
	DatabaseURL string `env:"DATABASE_URL" secret:"true"`
	// NATSURL is the JetStream server (NATS >= 2.12: scheduled messages); the project runs its
	// pinned nats-server on 14222, never the system one on 4222. On a locked-down server it
	// carries the service's user and password (nats://user:password@host:port).
	NATSURL string `env:"NATS_URL" envDefault:"nats://127.0.0.1:14222" secret:"true"`
	// NATSStreamReplicas is how many replicas the streams are configured with: 1 on a single
	// server, 3 on a three-node JetStream cluster. A service creates missing streams with it (on
	// a server without authentication) and reports a stream that has another; it never changes
	// an existing stream (`stockflow streams apply` does).
	NATSStreamReplicas int `env:"NATS_STREAM_REPLICAS" envDefault:"1"`
	// AutoMigrate creates the database and applies migrations at start. Kubernetes runs
	// `<svc> migrate` as a Job and sets it false.
	AutoMigrate bool `env:"AUTO_MIGRATE" envDefault:"true"`
	// LogLevel is DEBUG, INFO, WARN or ERROR.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"INFO"`
	// ShutdownTimeout bounds the graceful drain at exit.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s"`
	// ConsumerAckWait is how long a delivery may stay unacknowledged before JetStream
	// redelivers it (the handler's process died or hung); consumers that set none use it.
	ConsumerAckWait time.Duration `env:"CONSUMER_ACK_WAIT" envDefault:"30s"`
	// ConsumerWorkers is how many messages each consumer handles at once (consumers that set
	// none); every handler is an idempotent transaction that tolerates reordering.
	ConsumerWorkers int `env:"CONSUMER_WORKERS" envDefault:"8"`
	// RelayBatch is how many outbox rows the relay publishes per round trip.
	RelayBatch int `env:"OUTBOX_RELAY_BATCH" envDefault:"256"`
	// InboxRetention is how long the consumers' inbox claims are kept: a message older than
	// that is no longer recognised as processed. serve prunes older claims every hour. It must
	// cover the event streams' 14 days (a consumer reset replays a stream from its oldest
	// message), or be 0: never prune.
	InboxRetention time.Duration `env:"INBOX_RETENTION" envDefault:"720h"`
	// ReconcileMode is how scheduled reconciliation runs treat what they find: repair (fix it
	// through the normal use cases; the point of the schedule) or check (report only).
	ReconcileMode string `env:"RECONCILE_MODE" envDefault:"repair"`
	// ReconcileCheckOnly names jobs (comma-separated) whose scheduled runs only check, even
	// when ReconcileMode is repair; say ledger_summary while a ledger fault is investigated.
	ReconcileCheckOnly []string `env:"RECONCILE_CHECK_ONLY" envSeparator:","`
	// ReconcileOutboxInterval is how often the outbox job runs (0: never on a schedule).
	ReconcileOutboxInterval time.Duration `env:"RECONCILE_OUTBOX_INTERVAL" envDefault:"1m"`
	// ReconcileOutboxAge is how long an outbox row may stay unpublished before the outbox
	// job reports it (and, repairing, publishes it).
	ReconcileOutboxAge time.Duration `env:"RECONCILE_OUTBOX_AGE" envDefault:"1m"`
	// AuthJWKS is the JWKS (a file, or an http(s) URL of the identity provider) whose keys sign
	// the bearer tokens every endpoint but health and the signed callbacks requires; serve
	// refuses to start without it.
	AuthJWKS string `env:"AUTH_JWKS"`
	// AuthIssuer and AuthAudience are the iss and aud a token must carry.
	AuthIssuer   string `env:"AUTH_ISSUER" envDefault:"stockflow"`
	AuthAudience string `env:"AUTH_AUDIENCE" envDefault:"stockflow"`
	// AuthServiceKey is this service's own private signing key (a JWK file, key id
	// "service:<name>"): it signs the service tokens of its calls to other services.
	AuthServiceKey string `env:"AUTH_SERVICE_KEY"`
	// PprofAddr, when set, is where Go's profiler (net/http/pprof, /debug/pprof/) listens: a
	// loopback address, since it has no authentication (kubectl port-forward reaches it in a
	// pod); port 0 takes a free port, logged at start. Empty, the default: off.
	PprofAddr string `env:"PPROF_ADDR"`
	// ReconcileLagMax is how many messages a consumer may be behind before the outbox job
	// reports it.
	ReconcileLagMax int `env:"RECONCILE_CONSUMER_LAG_MAX" envDefault:"1000"`
	// ClockOffset is for fault-injection runs only: it shifts this process's clock (the use
	// cases' Clock) as a stepped system clock would, ahead or (negative) behind, up to 24h
	// either way. PostgreSQL's now() and the NATS server's clock do not move. Leave it 0.
	ClockOffset time.Duration `env:"CLOCK_OFFSET" envDefault:"0s" deploy:"unset"`
}

// maxClockOffset bounds ClockOffset: a day either way is more than any stepped clock.
const maxClockOffset = 24 * time.Hour

// Clock is the time the service's use cases read: now, shifted by ClockOffset, in UTC and
// truncated to the microseconds PostgreSQL keeps (what is written reads back equal).
func (b Base) Clock() func() time.Time {
	offset := b.ClockOffset
	return func() time.Time { return time.Now().Add(offset).UTC().Truncate(time.Microsecond) }
}

// Validate reports the first setting that cannot work.
func (b Base) Validate() error {
	var errs []error
	if b.HTTPAddr == "" {
		errs = append(errs, errors.New("HTTP_ADDR is empty"))
	}
	if u, err := url.Parse(b.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		errs = append(errs, errors.New("DATABASE_URL must be a postgres:// URL"))
	}
	for _, one := range strings.Split(b.NATSURL, ",") { // a cluster's nodes, comma-separated
		if u, err := url.Parse(one); err != nil || u.Scheme != "nats" {
			errs = append(errs, errors.New("NATS_URL must be a nats:// URL, or several separated by commas"))
			break
		}
	}
	if b.NATSStreamReplicas < 1 || b.NATSStreamReplicas > 5 {
		errs = append(errs, errors.New("NATS_STREAM_REPLICAS must be between 1 and 5"))
	}
	if b.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("SHUTDOWN_TIMEOUT must be positive"))
	}
	if b.ConsumerAckWait < time.Second {
		errs = append(errs, errors.New("CONSUMER_ACK_WAIT must be at least 1s"))
	}
	if b.ConsumerWorkers < 1 || b.ConsumerWorkers > 256 {
		errs = append(errs, errors.New("CONSUMER_WORKERS must be between 1 and 256"))
	}
	if b.RelayBatch < 1 || b.RelayBatch > natsx.PublishWindow {
		errs = append(errs, fmt.Errorf("OUTBOX_RELAY_BATCH must be between 1 and %d (the publish window)", natsx.PublishWindow))
	}
	if b.InboxRetention != 0 && b.InboxRetention < minInboxRetention() {
		errs = append(errs, fmt.Errorf("INBOX_RETENTION must be 0 (keep claims) or at least %s, the event streams' max age", minInboxRetention()))
	}
	if b.ReconcileMode != "check" && b.ReconcileMode != "repair" {
		errs = append(errs, errors.New("RECONCILE_MODE must be check or repair"))
	}
	if b.ReconcileOutboxInterval < 0 || b.ReconcileOutboxAge < 0 || b.ReconcileLagMax < 0 {
		errs = append(errs, errors.New("RECONCILE_OUTBOX_INTERVAL, RECONCILE_OUTBOX_AGE and RECONCILE_CONSUMER_LAG_MAX must not be negative"))
	}
	if b.PprofAddr != "" && !loopback(b.PprofAddr) {
		errs = append(errs, fmt.Errorf("PPROF_ADDR %q must be a loopback host and port (127.0.0.1:6060): the profiler has no authentication", b.PprofAddr))
	}
	if b.ClockOffset < -maxClockOffset || b.ClockOffset > maxClockOffset {
		errs = append(errs, fmt.Errorf("CLOCK_OFFSET must be between -%s and %s", maxClockOffset, maxClockOffset))
	}
	return errors.Join(errs...)
}

// loopback reports whether addr is a host:port on the loopback interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AuthConfig is the token configuration of the service.
func (b Base) AuthConfig() auth.Config {
	return auth.Config{JWKS: b.AuthJWKS, Issuer: b.AuthIssuer, Audience: b.AuthAudience}
}

// Default sets the service's own defaults where the environment left them empty.
func (b *Base) Default(httpAddr, databaseURL string) {
	if b.HTTPAddr == "" {
		b.HTTPAddr = httpAddr
	}
	if b.DatabaseURL == "" {
		b.DatabaseURL = databaseURL
	}
}

// LoadConfig fills cfg, a pointer to a struct, from environ (os.Environ form).
func LoadConfig(cfg any, environ []string) error {
	err := env.ParseWithOptions(cfg, env.Options{Environment: env.ToMap(environ)})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// LogAttrs renders cfg for the startup log, masking every field tagged secret:"true" (URLs keep
// their host and path, lose their password).
func LogAttrs(cfg any) []any {
	var attrs []any
	for _, s := range envtag.Settings(cfg) {
		attrs = append(attrs, slog.String(s.Name, s.Shown()))
	}
	return attrs
}
