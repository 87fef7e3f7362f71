// Package config is the timeout service's configuration: one struct read from the
// environment once at startup, validated, and logged with secrets masked. Nothing else reads
// the environment.
package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/service"
)

// Defaults of the settings service.Base leaves to each service.
const (
	DefaultHTTPAddr    = "127.0.0.1:8084"
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/stockflow_timeout"
)

// Config is everything the timeout service reads from its environment: the settings every
// service shares (HTTP_ADDR, DATABASE_URL, NATS_URL, AUTO_MIGRATE, LOG_LEVEL, …) and its own.
type Config struct {
	service.Base
	// SweepInterval is how often the sweeper expires overdue deadlines the scheduled messages
	// missed: the worst-case extra delay of an expiry when a schedule is lost. 5s keeps well
	// inside the ≤30s a promotion's lock release may lag; a sweep is one index range scan.
	SweepInterval time.Duration `env:"TIMEOUT_SWEEP_INTERVAL" envDefault:"5s"`
	// SweepBatch is how many deadlines one sweeper transaction expires.
	SweepBatch int `env:"TIMEOUT_SWEEP_BATCH" envDefault:"500"`
	// CombineMaxBatch caps how many concurrent stock.locked are scheduled in one transaction
	// (1: each in its own).
	CombineMaxBatch int `env:"TIMEOUT_COMBINE_MAX_BATCH" envDefault:"128"`
}

// Load reads the configuration from environ (os.Environ form), fills in the timeout
// service's defaults and returns Validate's error.
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
	if c.SweepInterval < 100*time.Millisecond || c.SweepInterval > 10*time.Minute {
		errs = append(errs, fmt.Errorf("TIMEOUT_SWEEP_INTERVAL %s must be between 100ms and 10m", c.SweepInterval))
	}
	if c.SweepBatch < 1 || c.SweepBatch > 10000 {
		errs = append(errs, fmt.Errorf("TIMEOUT_SWEEP_BATCH %d must be between 1 and 10000", c.SweepBatch))
	}
	if c.CombineMaxBatch < 1 || c.CombineMaxBatch > 1000 {
		errs = append(errs, fmt.Errorf("TIMEOUT_COMBINE_MAX_BATCH %d must be between 1 and 1000", c.CombineMaxBatch))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}
