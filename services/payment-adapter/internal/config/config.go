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
	// CombineMaxBatch caps how many concurrent order.created are remembered in one
	// transaction (1: each in its own).
	CombineMaxBatch int `env:"PAYMENT_COMBINE_MAX_BATCH" envDefault:"128"`
	// PaidNotSoldInterval is how often the paid-but-not-sold job re-drives succeeded payments
	// stock did not sell (a lost or dead-lettered payment.succeeded); 0: off.
	PaidNotSoldInterval time.Duration `env:"RECONCILE_PAID_NOT_SOLD_INTERVAL" envDefault:"1m"`
	// PaidNotSoldAge is how old a payment must be before that job looks at it: its event and
	// any stock.sell_failed refund normally complete well within it.
	PaidNotSoldAge time.Duration `env:"RECONCILE_PAID_NOT_SOLD_AGE" envDefault:"2m"`
	// PaidNotSoldLookback is how far back that job looks: older payments are settled history.
	PaidNotSoldLookback time.Duration `env:"RECONCILE_PAID_NOT_SOLD_LOOKBACK" envDefault:"24h"`
	// ReconcileBatch is how many records one run of a job looks at most: payments
	// (paid_not_sold), refunds (unconfirmed_refunds, and as many failed ones), provider queries
	// (lost_callbacks: orders × providers that can be asked).
	ReconcileBatch int `env:"RECONCILE_BATCH" envDefault:"500"`
	// RefundsInterval is how often the unconfirmed refunds job asks the providers about
	// refunds still requested or pending and reports failed ones; 0: off.
	RefundsInterval time.Duration `env:"RECONCILE_REFUNDS_INTERVAL" envDefault:"1m"`
	// RefundsAge is how long a refund may stay requested or pending before that job asks: the
	// consumer's own call and the provider's notification normally settle it well within it.
	RefundsAge time.Duration `env:"RECONCILE_REFUNDS_AGE" envDefault:"2m"`
	// LostCallbacksInterval is how often the lost callbacks job asks the providers about orders
	// still awaiting payment; 0: off.
	LostCallbacksInterval time.Duration `env:"RECONCILE_LOST_CALLBACKS_INTERVAL" envDefault:"1m"`
	// LostCallbacksAge is how long payment-adapter must have known an unpaid order before that
	// job asks about it: a paying buyer's callback normally arrives within it.
	LostCallbacksAge time.Duration `env:"RECONCILE_LOST_CALLBACKS_AGE" envDefault:"2m"`

	// The real providers (providers.go), each on when its required settings are set.
	Stripe
	WeChatPay
	Alipay
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
	if c.CombineMaxBatch < 1 || c.CombineMaxBatch > 1000 {
		errs = append(errs, fmt.Errorf("PAYMENT_COMBINE_MAX_BATCH %d must be between 1 and 1000", c.CombineMaxBatch))
	}
	if c.ReconcileBatch < 1 || c.ReconcileBatch > 10000 {
		errs = append(errs, errors.New("RECONCILE_BATCH must be between 1 and 10000"))
	}
	if c.RefundsInterval < 0 || c.RefundsAge < 0 {
		errs = append(errs, errors.New("RECONCILE_REFUNDS_INTERVAL and RECONCILE_REFUNDS_AGE must not be negative"))
	}
	if c.LostCallbacksInterval < 0 || c.LostCallbacksAge < 0 {
		errs = append(errs, errors.New("RECONCILE_LOST_CALLBACKS_INTERVAL and RECONCILE_LOST_CALLBACKS_AGE must not be negative"))
	}
	if _, err := c.RealProviders(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}
