// Package config is payment-adapter's configuration: one struct read from the environment
// once at startup, validated, and logged with secrets masked (service.LogAttrs masks every
// field tagged secret:"true"). Nothing else reads the environment.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/stockflow/stockflow/pkg/service"
)

// Defaults of the settings service.Base leaves to each service.
const (
	DefaultHTTPAddr    = "127.0.0.1:8083"
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/stockflow_payment"
)

// Config is everything payment-adapter reads from its environment: the settings every
// service shares (HTTP_ADDR, DATABASE_URL, NATS_URL, AUTO_MIGRATE, LOG_LEVEL, …) and its own.
type Config struct {
	service.Base
	// SandboxSecret is the HMAC-SHA256 key of the sandbox provider's X-Sandbox-Signature.
	// Required; masked in logs.
	SandboxSecret string `env:"PAYMENT_SANDBOX_SECRET" secret:"true"`
	// StockURL is the stock service's HTTP API, which the paid-but-not-sold job asks which
	// payment sold an order.
	StockURL string `env:"PAYMENT_STOCK_URL" envDefault:"http://127.0.0.1:8082"`
	// PaidNotSoldInterval is how often the paid-but-not-sold job re-drives succeeded payments
	// stock did not sell (a lost or dead-lettered payment.succeeded); 0: off.
	PaidNotSoldInterval time.Duration `env:"RECONCILE_PAID_NOT_SOLD_INTERVAL" envDefault:"1m"`
	// PaidNotSoldAge is how old a payment must be before that job looks at it: its event and
	// any stock.sell_failed refund normally complete well within it.
	PaidNotSoldAge time.Duration `env:"RECONCILE_PAID_NOT_SOLD_AGE" envDefault:"2m"`
	// PaidNotSoldLookback is how far back that job looks: older payments are settled history.
	PaidNotSoldLookback time.Duration `env:"RECONCILE_PAID_NOT_SOLD_LOOKBACK" envDefault:"24h"`
	// ReconcileBatch is how many payments one run of that job checks at most.
	ReconcileBatch int `env:"RECONCILE_BATCH" envDefault:"500"`
}

// Load reads the configuration from environ (os.Environ form), fills in payment-adapter's
// defaults and returns Validate's error.
func Load(environ []string) (Config, error) {
	var cfg Config
	if err := service.LoadConfig(&cfg, environ); err != nil {
		return Config{}, err
	}
	cfg.Default(DefaultHTTPAddr, DefaultDatabaseURL)
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports every setting that cannot work, joined.
func (c Config) Validate() error {
	errs := []error{c.Base.Validate()}
	if c.SandboxSecret == "" {
		errs = append(errs, errors.New("PAYMENT_SANDBOX_SECRET is required"))
	}
	if u, err := url.Parse(c.StockURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("PAYMENT_STOCK_URL %q must be an http(s) URL", c.StockURL))
	}
	if c.PaidNotSoldInterval < 0 || c.PaidNotSoldAge < 0 || c.PaidNotSoldLookback <= c.PaidNotSoldAge {
		errs = append(errs, errors.New("RECONCILE_PAID_NOT_SOLD_INTERVAL and _AGE must not be negative, _LOOKBACK must exceed _AGE"))
	}
	if c.ReconcileBatch < 1 || c.ReconcileBatch > 10000 {
		errs = append(errs, errors.New("RECONCILE_BATCH must be between 1 and 10000"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}
