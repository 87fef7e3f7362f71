// Package config is payment-adapter's configuration: one struct read from the environment
// once at startup, validated, and logged with secrets masked (service.LogAttrs masks every
// field tagged secret:"true"). Nothing else reads the environment.
package config

import (
	"errors"
	"fmt"

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
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}
