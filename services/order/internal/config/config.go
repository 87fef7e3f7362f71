// Package config is the order service's configuration: one struct read from the environment
// once at startup, over the service's defaults, and validated. Nothing else reads the
// environment; pkg/service logs it with secrets masked.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/stockflow/stockflow/pkg/service"
)

// Config is every setting of the order service.
type Config struct {
	service.Base
	// PaymentTimeout is an order's payment window when the request names none (1s..24h).
	PaymentTimeout time.Duration `env:"PAYMENT_TIMEOUT" envDefault:"30m"`
	// StockURL is the stock service's HTTP API, which the stuck-order job asks what became
	// of an order's locks.
	StockURL string `env:"ORDER_STOCK_URL" envDefault:"http://127.0.0.1:8082"`
	// StuckOrdersInterval is how often the stuck-order job looks for orders still pending or
	// awaiting_payment long after their payment deadline; 0: off.
	StuckOrdersInterval time.Duration `env:"RECONCILE_STUCK_ORDERS_INTERVAL" envDefault:"1m"`
	// StuckOrdersGrace is how long past its deadline an order must be for that job: stock's
	// overdue-lock sweep (30 s) and the events that follow normally settle it well within.
	StuckOrdersGrace time.Duration `env:"RECONCILE_STUCK_ORDERS_GRACE" envDefault:"2m"`
	// CombineMaxBatch caps how many concurrent POST /v1/orders are stored in one transaction
	// (1..1000); 1 stores each in its own.
	CombineMaxBatch int `env:"ORDER_COMBINE_MAX_BATCH" envDefault:"128"`
	// ReconcileBatch is how many orders one run of that job handles at most.
	ReconcileBatch int `env:"RECONCILE_BATCH" envDefault:"500"`
}

// Load reads the configuration from environ (os.Environ form) over the service's defaults
// (HTTP_ADDR 127.0.0.1:8081, DATABASE_URL …/stockflow_order) and returns Validate's error.
func Load(environ []string) (Config, error) {
	cfg := Config{Base: service.Base{
		HTTPAddr:    "127.0.0.1:8081",
		DatabaseURL: "postgres://postgres@127.0.0.1:5432/stockflow_order",
	}}
	if err := service.LoadConfig(&cfg, environ); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// Validate reports every setting that cannot work, joined.
func (c Config) Validate() error {
	var errs []error
	if err := c.Base.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.PaymentTimeout < time.Second || c.PaymentTimeout > 24*time.Hour {
		errs = append(errs, fmt.Errorf("PAYMENT_TIMEOUT %s must be between 1s and 24h", c.PaymentTimeout))
	}
	if u, err := url.Parse(c.StockURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("ORDER_STOCK_URL %q must be an http(s) URL", c.StockURL))
	}
	if c.StuckOrdersInterval < 0 || c.StuckOrdersGrace < 0 {
		errs = append(errs, errors.New("RECONCILE_STUCK_ORDERS_INTERVAL and _GRACE must not be negative"))
	}
	if c.CombineMaxBatch < 1 || c.CombineMaxBatch > 1000 {
		errs = append(errs, errors.New("ORDER_COMBINE_MAX_BATCH must be between 1 and 1000"))
	}
	if c.ReconcileBatch < 1 || c.ReconcileBatch > 10000 {
		errs = append(errs, errors.New("RECONCILE_BATCH must be between 1 and 10000"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}
