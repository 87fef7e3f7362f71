// Package config is the console's configuration: where it listens and the base URLs of the
// four services whose public APIs it calls. It has no database, broker or secret of its own.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/caarlos0/env/v11"
)

// Config is read from the environment by Load.
type Config struct {
	// HTTPAddr is where the console serves its pages, its /api proxy and /healthz.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8085"`
	// OrderURL, StockURL, PaymentURL and TimeoutURL are the services' base URLs; the console
	// calls their public APIs with the signed-in person's token and nothing else.
	OrderURL   string `env:"CONSOLE_ORDER_URL" envDefault:"http://127.0.0.1:8081"`
	StockURL   string `env:"CONSOLE_STOCK_URL" envDefault:"http://127.0.0.1:8082"`
	PaymentURL string `env:"CONSOLE_PAYMENT_URL" envDefault:"http://127.0.0.1:8083"`
	TimeoutURL string `env:"CONSOLE_TIMEOUT_URL" envDefault:"http://127.0.0.1:8084"`
	// LiveInterval is how often the water level of a watched SKU is read from stock: one read
	// per SKU per interval, however many browsers watch it.
	LiveInterval time.Duration `env:"CONSOLE_LIVE_INTERVAL" envDefault:"1s"`
	// UpstreamTimeout bounds one call to a service.
	UpstreamTimeout time.Duration `env:"CONSOLE_UPSTREAM_TIMEOUT" envDefault:"15s"`
	// CompareReport is the file `stockflow compare` writes as it runs; the compare page draws
	// it. A local demonstration only: a deployment leaves it unset.
	CompareReport string `env:"CONSOLE_COMPARE_REPORT" deploy:"unset"`
	// LogLevel is DEBUG, INFO, WARN or ERROR.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"INFO"`
}

// Load reads the environment (KEY=VALUE entries) into a validated Config.
func Load(environ []string) (Config, error) {
	var cfg Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: env.ToMap(environ)}); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	return cfg, cfg.Validate()
}

// Validate says what is wrong with cfg, every problem at once.
func (c Config) Validate() error {
	var errs []error
	for name, u := range c.Services() {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("the %s URL %q is not an http(s) URL", name, u))
		}
	}
	if c.LiveInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("CONSOLE_LIVE_INTERVAL %s: at least 100ms", c.LiveInterval))
	}
	if c.UpstreamTimeout <= 0 {
		errs = append(errs, errors.New("CONSOLE_UPSTREAM_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// Services are the base URLs by the name the console's /api/{service}/ paths use.
func (c Config) Services() map[string]string {
	return map[string]string{"order": c.OrderURL, "stock": c.StockURL, "payment-adapter": c.PaymentURL, "timeout": c.TimeoutURL}
}

// LogValue is the configuration as logged at start (it holds no secret).
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("http_addr", c.HTTPAddr), slog.String("order", c.OrderURL),
		slog.String("stock", c.StockURL), slog.String("payment_adapter", c.PaymentURL),
		slog.String("timeout", c.TimeoutURL), slog.Duration("live_interval", c.LiveInterval))
}
