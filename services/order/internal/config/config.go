// Package config is the order service's configuration: one struct read from the environment
// once at startup, over the service's defaults, and validated. Nothing else reads the
// environment; pkg/service logs it with secrets masked.
package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/order/internal/app"
)

// Config is every setting of the order service.
type Config struct {
	service.Base
	// PaymentWindow is an order's payment window when none of its SKUs' prices sets one of
	// its own (ORDER_MIN_PAYMENT_WINDOW..24h). A request may only shorten it.
	PaymentWindow time.Duration `env:"ORDER_PAYMENT_WINDOW" envDefault:"30m"`
	// MinPaymentWindow is the shortest payment window a SKU's price or a request may set
	// (1s..24h): a buyer cannot make an order that is closed before anyone could pay it. Local
	// runs and tests lower it (the demo's sale uses 15 s windows, e2e tests 1-2 s).
	MinPaymentWindow time.Duration `env:"ORDER_MIN_PAYMENT_WINDOW" envDefault:"1m"`
	// PriceCacheTTL is how long a replica uses a price it read before reading it again
	// (0..1m; 0: read for every order). PUT /v1/prices forgets it at once on its own replica,
	// so another replica may price by the old terms for up to this long.
	PriceCacheTTL time.Duration `env:"ORDER_PRICE_CACHE_TTL" envDefault:"2s"`
	// RatePerBuyer is how many orders per second one buyer may place on this replica, in
	// bursts of up to RatePerBuyerBurst (at least 1); 0: unlimited.
	RatePerBuyer      float64 `env:"ORDER_RATE_PER_BUYER" envDefault:"5"`
	RatePerBuyerBurst int     `env:"ORDER_RATE_PER_BUYER_BURST" envDefault:"10"`
	// RatePerSKU is how many orders per second one SKU takes on this replica, in bursts of up
	// to RatePerSKUBurst (0: the rate, rounded up); 0: unlimited. A flash sale sets it.
	RatePerSKU      float64 `env:"ORDER_RATE_PER_SKU" envDefault:"0"`
	RatePerSKUBurst int     `env:"ORDER_RATE_PER_SKU_BURST" envDefault:"0"`
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
	// Gate is the flash-sale gate (REDIS_URL, GATE_TIMEOUT): an armed SKU's buyers are
	// admitted by Redis before their order is created, and turned away sold_out when it has
	// nothing left. No REDIS_URL: every order takes the database path.
	Gate gate.Config
	// GateSoldOutTTL is how long a replica remembers that the gate answered sold_out for a
	// SKU and answers that SKU's buyers 409 at once, before their token is checked
	// (0..5s; 0: ask the gate every time). A unit given back meanwhile reaches the next buyer
	// at most this late (on the replica that gave it back, at once); the database decides
	// every order, so nothing is oversold. 500 ms: shorter than a buyer's next click, and a
	// storm of 10,000 POST/s then asks Redis a few times a second instead of 10,000.
	GateSoldOutTTL time.Duration `env:"GATE_SOLD_OUT_TTL" envDefault:"500ms"`
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
	if c.MinPaymentWindow < time.Second || c.MinPaymentWindow > 24*time.Hour {
		errs = append(errs, fmt.Errorf("ORDER_MIN_PAYMENT_WINDOW %s must be between 1s and 24h", c.MinPaymentWindow))
	}
	if c.PaymentWindow < c.MinPaymentWindow || c.PaymentWindow > 24*time.Hour {
		errs = append(errs, fmt.Errorf("ORDER_PAYMENT_WINDOW %s must be between ORDER_MIN_PAYMENT_WINDOW (%s) and 24h", c.PaymentWindow, c.MinPaymentWindow))
	}
	if c.PriceCacheTTL < 0 || c.PriceCacheTTL > time.Minute {
		errs = append(errs, errors.New("ORDER_PRICE_CACHE_TTL must be between 0 and 1m"))
	}
	if c.RatePerBuyer < 0 || c.RatePerBuyerBurst < 0 || c.RatePerSKU < 0 || c.RatePerSKUBurst < 0 {
		errs = append(errs, errors.New("ORDER_RATE_PER_BUYER, ORDER_RATE_PER_SKU and their _BURST must not be negative"))
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
	if c.GateSoldOutTTL < 0 || c.GateSoldOutTTL > 5*time.Second {
		errs = append(errs, fmt.Errorf("GATE_SOLD_OUT_TTL %s must be between 0 and 5s", c.GateSoldOutTTL))
	}
	if err := c.Gate.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}

// Policy is the sales policy the settings describe.
func (c Config) Policy() app.Policy {
	skuBurst := c.RatePerSKUBurst
	if skuBurst == 0 {
		skuBurst = int(math.Ceil(c.RatePerSKU))
	}
	return app.Policy{
		PaymentWindow: c.PaymentWindow, MinPaymentWindow: c.MinPaymentWindow, PriceCacheTTL: c.PriceCacheTTL,
		PerBuyer: app.RateLimit{Rate: c.RatePerBuyer, Burst: c.RatePerBuyerBurst},
		PerSKU:   app.RateLimit{Rate: c.RatePerSKU, Burst: skuBurst},
	}
}
