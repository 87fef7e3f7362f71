package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The storefront read (the seed's §七.5: "对于用户端展示，缓存 5 秒刷新一次完全足够"): buyers see
// every SKU's available units from a snapshot at most a TTL old, which one query reads in the
// background; no request reaches the database.

// ErrAvailabilityNotReady is what Availability.Get returns before the first snapshot: the
// first refresh failed, or did not finish within availabilityTimeout.
var ErrAvailabilityNotReady = errors.New("storefront availability not loaded yet")

// availabilityTimeout bounds one refresh, and how long a request made before the first
// snapshot waits for it.
const availabilityTimeout = 10 * time.Second

// AvailabilitySource is the one query the storefront read model makes; internal/postgres
// implements it.
type AvailabilitySource interface {
	// Availability returns every SKU's available units (summed over its slots), in one query.
	Availability(ctx context.Context) (map[string]int64, error)
}

// AvailabilityStatus is what a storefront shows of a SKU.
type AvailabilityStatus string

// The statuses: LowStock is 1..AvailabilityOptions.Low units; with Low 0 there is none.
const (
	InStock  AvailabilityStatus = "in_stock"
	LowStock AvailabilityStatus = "low"
	SoldOut  AvailabilityStatus = "sold_out"
)

// AvailabilityOptions configure an Availability.
type AvailabilityOptions struct {
	// TTL is how often the snapshot is refreshed, and how long a CDN may keep an answer.
	TTL time.Duration
	// Low: a SKU with 1..Low available units is LowStock; 0: never.
	Low int64
	// Log gets the failed refreshes; nil: discarded.
	Log *slog.Logger
	// Meters makes the instruments (docs/observability.md); nil: the global MeterProvider.
	Meters metric.MeterProvider
}

// SKUAvailability is one SKU of an answer.
type SKUAvailability struct {
	SKU       string
	Available int64
	Status    AvailabilityStatus
}

// AvailabilityAnswer is what Get answers: the SKUs it knows, in the order asked, and the ones
// it does not.
type AvailabilityAnswer struct {
	AsOf    time.Time     // when the snapshot's query started: its figures are at least that new
	MaxAge  time.Duration // how long the answer stays within the TTL (0 once the snapshot is older)
	SKUs    []SKUAvailability
	Unknown []string
}

// Availability is the storefront's read model: a snapshot of every SKU's available units,
// replaced by Run every TTL and read by Get without a lock. A failed refresh keeps the last
// snapshot, served with its true AsOf, and is logged and counted.
type Availability struct {
	src  AvailabilitySource
	opts AvailabilityOptions
	now  func() time.Time

	snap      atomic.Pointer[availabilitySnapshot]
	tried     chan struct{} // closed once the first refresh has been tried
	triedOnce sync.Once

	refreshes                metric.Int64Counter
	refreshDuration          metric.Float64Histogram
	age                      metric.Float64ObservableGauge
	refreshOK, refreshFailed []metric.AddOption
}

type availabilitySnapshot struct {
	asOf      time.Time
	available map[string]int64
}

// NewAvailability returns the read model over src, empty until the first Refresh (Run makes it
// at once).
func NewAvailability(src AvailabilitySource, opts AvailabilityOptions) *Availability {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Meters == nil {
		opts.Meters = otel.GetMeterProvider()
	}
	a := &Availability{src: src, opts: opts, now: time.Now, tried: make(chan struct{})}
	meter := opts.Meters.Meter(instrumentation)
	var errs [3]error
	a.refreshes, errs[0] = meter.Int64Counter("stockflow.stock.availability.refreshes",
		metric.WithDescription("Refreshes of the storefront availability snapshot, by outcome (ok, failed)."), metric.WithUnit("{refresh}"))
	a.refreshDuration, errs[1] = meter.Float64Histogram("stockflow.stock.availability.refresh.duration",
		metric.WithDescription("One refresh of the storefront availability snapshot (its one query)."), metric.WithUnit("s"))
	a.age, errs[2] = meter.Float64ObservableGauge("stockflow.stock.availability.age",
		metric.WithDescription("Age of the storefront availability snapshot being served; above the TTL: refreshes fail."), metric.WithUnit("s"))
	if err := errors.Join(errs[:]...); err != nil {
		otel.Handle(err)
	}
	a.refreshOK = []metric.AddOption{metric.WithAttributes(attribute.String("outcome", "ok"))}
	a.refreshFailed = []metric.AddOption{metric.WithAttributes(attribute.String("outcome", "failed"))}
	return a
}

// Run refreshes the snapshot now and then every TTL until ctx ends (a pkg/service loop); it
// returns nil then. A refresh slower than the TTL delays the next one: refreshes never overlap.
// The age gauge reports while Run runs.
func (a *Availability) Run(ctx context.Context) error {
	reg, err := a.opts.Meters.Meter(instrumentation).RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if s := a.snap.Load(); s != nil {
			o.ObserveFloat64(a.age, a.now().Sub(s.asOf).Seconds())
		}
		return nil
	}, a.age)
	if err != nil {
		otel.Handle(err)
	} else {
		defer func() {
			if err := reg.Unregister(); err != nil {
				otel.Handle(err)
			}
		}()
	}
	t := time.NewTicker(a.opts.TTL)
	defer t.Stop()
	for {
		if err := a.Refresh(ctx); err != nil && ctx.Err() == nil {
			args := []any{"err", err, "ttl", a.opts.TTL}
			if s := a.snap.Load(); s != nil {
				args = append(args, "serving_as_of", s.asOf, "age", a.now().Sub(s.asOf))
			}
			a.opts.Log.WarnContext(ctx, "availability refresh failed; serving the last snapshot", args...)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads a new snapshot in one query and serves it, unless a newer one is served
// already. On an error the last snapshot stays.
func (a *Availability) Refresh(ctx context.Context) error {
	defer a.triedOnce.Do(func() { close(a.tried) })
	ctx, cancel := context.WithTimeout(ctx, availabilityTimeout)
	defer cancel()
	start := a.now()
	available, err := a.src.Availability(ctx)
	a.refreshDuration.Record(ctx, a.now().Sub(start).Seconds())
	if err != nil {
		a.refreshes.Add(ctx, 1, a.refreshFailed...)
		return err
	}
	a.refreshes.Add(ctx, 1, a.refreshOK...)
	next := &availabilitySnapshot{asOf: start, available: available}
	for {
		cur := a.snap.Load()
		if (cur != nil && !cur.asOf.Before(start)) || a.snap.CompareAndSwap(cur, next) {
			return nil
		}
	}
}

// Get answers skus from the snapshot, in the order given. Before the first snapshot it waits
// for the first refresh (at most availabilityTimeout, or until ctx ends); when that brings
// none it returns ErrAvailabilityNotReady.
func (a *Availability) Get(ctx context.Context, skus []string) (AvailabilityAnswer, error) {
	s := a.snap.Load()
	if s == nil {
		wait := time.NewTimer(availabilityTimeout)
		defer wait.Stop()
		select {
		case <-a.tried:
		case <-ctx.Done():
		case <-wait.C:
		}
		if s = a.snap.Load(); s == nil {
			return AvailabilityAnswer{}, ErrAvailabilityNotReady
		}
	}
	ans := AvailabilityAnswer{AsOf: s.asOf, MaxAge: max(0, s.asOf.Add(a.opts.TTL).Sub(a.now())),
		SKUs: make([]SKUAvailability, 0, len(skus)), Unknown: []string{}}
	for _, sku := range skus {
		n, ok := s.available[sku]
		if !ok {
			ans.Unknown = append(ans.Unknown, sku)
			continue
		}
		ans.SKUs = append(ans.SKUs, SKUAvailability{SKU: sku, Available: n, Status: a.status(n)})
	}
	return ans, nil
}

func (a *Availability) status(available int64) AvailabilityStatus {
	switch {
	case available <= 0:
		return SoldOut
	case available <= a.opts.Low:
		return LowStock
	default:
		return InStock
	}
}
