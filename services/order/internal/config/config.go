// Package config is the order service's configuration: one struct read from the environment
// once at startup, over the service's defaults, and validated. Nothing else reads the
// environment; pkg/service logs it with secrets masked.
package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/service"
)

// Config is every setting of the order service.
type Config struct {
	service.Base
	// PaymentTimeout is an order's payment window when the request names none (1s..24h).
	PaymentTimeout time.Duration `env:"PAYMENT_TIMEOUT" envDefault:"30m"`
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
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}
