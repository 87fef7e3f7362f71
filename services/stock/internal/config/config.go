// Package config is the stock service's configuration, read from the environment.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Config is every setting of the stock service.
type Config struct {
	service.Base
	// OrderURL is the order service's HTTP API, which the orphan-lock job asks whether a
	// lock's order exists and is still open.
	OrderURL string `env:"STOCK_ORDER_URL" envDefault:"http://127.0.0.1:8081"`
	// OverdueLocksInterval is how often the overdue-lock job releases locks still held past
	// their deadline (the sweep behind the timeout service's scheduled messages); 0: off.
	OverdueLocksInterval time.Duration `env:"RECONCILE_OVERDUE_LOCKS_INTERVAL" envDefault:"30s"`
	// OverdueLocksGrace is how long past its deadline a lock must be for that job: the
	// timeout service normally releases it first (at the deadline, its sweeper within 5 s).
	OverdueLocksGrace time.Duration `env:"RECONCILE_OVERDUE_LOCKS_GRACE" envDefault:"10s"`
	// OrphanLocksInterval is how often the orphan-lock job releases locks whose order does
	// not exist or is closed, cancelled or rejected at the order service; 0: off.
	OrphanLocksInterval time.Duration `env:"RECONCILE_ORPHAN_LOCKS_INTERVAL" envDefault:"5m"`
	// OrphanLocksAge is how old a lock must be before that job asks about its order.
	OrphanLocksAge time.Duration `env:"RECONCILE_ORPHAN_LOCKS_AGE" envDefault:"1m"`
	// LedgerInterval is how often the ledger-summary job compares every SKU's summary with
	// the fold of its ledger (repair: rebuild the summary from the ledger); 0: off.
	LedgerInterval time.Duration `env:"RECONCILE_LEDGER_INTERVAL" envDefault:"10m"`
	// CombineMaxBatch caps how many concurrent lock requests (or sells, releases, ships,
	// refunds) run together in one transaction (DESIGN §7); 1 runs each alone.
	CombineMaxBatch int `env:"STOCK_COMBINE_MAX_BATCH" envDefault:"128"`
	// CombineWait is how long a batch with room left waits for more requests; 0 takes what
	// is queued at once (batches still form under load, while the previous one commits).
	CombineWait time.Duration `env:"STOCK_COMBINE_WAIT" envDefault:"0s"`
	// CombineFlushers is how many batches run at once. One is fastest on a 2-core machine
	// (measured, docs/performance.md): while it commits, the next batch queues up.
	CombineFlushers int `env:"STOCK_COMBINE_FLUSHERS" envDefault:"1"`
	// ReconcileBatch is how many orders one run of a lock job handles at most.
	ReconcileBatch int `env:"RECONCILE_BATCH" envDefault:"500"`
	// WatchSKUs are the SKUs whose figures (on_hand, available, locked, sold, incoming) the
	// stockflow.stock.sku.quantity gauge reports, comma-separated: the flash sale's hot SKUs
	// on the dashboard. Read from the database at most every few seconds; empty: none.
	WatchSKUs []string `env:"STOCK_WATCH_SKUS" envSeparator:","`
	// AvailabilityTTL is how old the storefront's GET /v1/availability figures may be: one
	// query reads every SKU's available units this often, in the background, and requests are
	// answered from the last read, never the database (the seed's §七.5: 5 s). 100ms to 1m.
	AvailabilityTTL time.Duration `env:"STOCK_AVAILABILITY_TTL" envDefault:"5s"`
	// AvailabilityLow: a SKU with 1 to this many available units is "low" on the storefront
	// rather than "in_stock"; 0: never low.
	AvailabilityLow int64 `env:"STOCK_AVAILABILITY_LOW" envDefault:"10"`
	// Gate is the flash-sale gate in Redis (REDIS_URL, GATE_TIMEOUT) that POST
	// /v1/skus/{sku}/gate arms from the database and the gate job keeps equal to it; no URL:
	// no gate, the routes answer 503 gate_unavailable.
	Gate gate.Config
	// GateInterval is how often the gate job checks armed and planned gates against the
	// database (and arms a planned one at its time): during a sale and after it. 100ms to 1h.
	GateInterval time.Duration `env:"RECONCILE_GATE_INTERVAL" envDefault:"5s"`
	// GateOrphanAge: units an order took at the gate come back when stock has not seen the
	// order this long after the take (an order service that died between take and create).
	GateOrphanAge time.Duration `env:"RECONCILE_GATE_ORPHAN_AGE" envDefault:"2m"`
}

// Load reads the configuration from environ (os.Environ form) over the service's defaults.
func Load(environ []string) (Config, error) {
	var cfg Config
	if err := service.LoadConfig(&cfg, environ); err != nil {
		return cfg, err
	}
	cfg.Default("127.0.0.1:8082", "postgres://postgres@127.0.0.1:5432/stockflow_stock")
	// "A, B," is A and B: a space after a comma or a trailing comma is not a SKU.
	watch := cfg.WatchSKUs[:0]
	for _, sku := range cfg.WatchSKUs {
		if sku = strings.TrimSpace(sku); sku != "" {
			watch = append(watch, sku)
		}
	}
	cfg.WatchSKUs = watch
	return cfg, cfg.Validate()
}

// Validate reports every setting that cannot work, joined.
func (c Config) Validate() error {
	errs := []error{c.Base.Validate()}
	if u, err := url.Parse(c.OrderURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("STOCK_ORDER_URL %q must be an http(s) URL", c.OrderURL))
	}
	for name, d := range map[string]time.Duration{"RECONCILE_OVERDUE_LOCKS_INTERVAL": c.OverdueLocksInterval, "RECONCILE_OVERDUE_LOCKS_GRACE": c.OverdueLocksGrace,
		"RECONCILE_ORPHAN_LOCKS_INTERVAL": c.OrphanLocksInterval, "RECONCILE_ORPHAN_LOCKS_AGE": c.OrphanLocksAge, "RECONCILE_LEDGER_INTERVAL": c.LedgerInterval} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", name))
		}
	}
	if c.CombineMaxBatch < 1 || c.CombineMaxBatch > 1000 {
		errs = append(errs, errors.New("STOCK_COMBINE_MAX_BATCH must be between 1 and 1000"))
	}
	if c.CombineWait < 0 || c.CombineWait > time.Second {
		errs = append(errs, errors.New("STOCK_COMBINE_WAIT must be between 0 and 1s"))
	}
	if c.CombineFlushers < 1 || c.CombineFlushers > 16 {
		errs = append(errs, errors.New("STOCK_COMBINE_FLUSHERS must be between 1 and 16"))
	}
	if c.ReconcileBatch < 1 || c.ReconcileBatch > 10000 {
		errs = append(errs, errors.New("RECONCILE_BATCH must be between 1 and 10000"))
	}
	if err := c.Gate.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.GateInterval < 100*time.Millisecond || c.GateInterval > time.Hour {
		errs = append(errs, errors.New("RECONCILE_GATE_INTERVAL must be between 100ms and 1h"))
	}
	if c.GateOrphanAge < 10*time.Second || c.GateOrphanAge > 24*time.Hour {
		errs = append(errs, errors.New("RECONCILE_GATE_ORPHAN_AGE must be between 10s and 24h"))
	}
	if c.AvailabilityTTL < 100*time.Millisecond || c.AvailabilityTTL > time.Minute {
		errs = append(errs, errors.New("STOCK_AVAILABILITY_TTL must be between 100ms and 1m"))
	}
	if c.AvailabilityLow < 0 || c.AvailabilityLow > stock.MaxQty {
		errs = append(errs, fmt.Errorf("STOCK_AVAILABILITY_LOW must be between 0 and %d", stock.MaxQty))
	}
	for _, sku := range c.WatchSKUs {
		if err := stock.ValidSKU(sku); err != nil {
			errs = append(errs, fmt.Errorf("STOCK_WATCH_SKUS: %w", err))
		}
	}
	return errors.Join(errs...)
}
