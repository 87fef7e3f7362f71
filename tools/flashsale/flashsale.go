// Package flashsale runs a flash sale against a running stockflow through its public HTTP APIs
// only — order, stock and the payment adapter's sandbox callback — so it works against any
// deployment by URL. It creates a fresh SKU, sends buyers at it, pays, cancels or abandons
// their orders, samples the SKU's water level every second, and then proves the invariants:
// nothing oversold, the quantities add up at every sample, the ledger folds to the summary, no
// lock outlives its deadline, every order ends, and its own counters match what the APIs say.
//
// The defaults reproduce the promotion of the design article (§五: 5,000 units, 78.1% of the
// locks paid, the unpaid rest released by timeout or cancel and bought again), with time
// scaled down so the whole sale takes about a minute and a half.
package flashsale

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/stockflow/stockflow/pkg/auth"
)

// Config is one flash sale. Default returns the demo's; RegisterFlags binds every field to a
// command-line flag.
type Config struct {
	OrderURL      string // order service base URL
	StockURL      string // stock service base URL
	PaymentURL    string // payment-adapter base URL
	SandboxSecret string // HMAC key of the sandbox provider's callback signature
	// Provider is who buyers pay through: sandbox (callbacks signed here with SandboxSecret),
	// or stripe, wechatpay or alipay through paysim at PaysimURL, which takes the payment and
	// delivers the provider's signed callback to the adapter.
	Provider  string
	PaysimURL string // paysim's control API (make up starts it)

	SKU       string // SKU to create; empty: FLASH-<random>
	Units     int64  // N: units put on sale
	Buyers    int    // M: first-wave buyers, each places one order
	MaxQty    int64  // each order takes 1..MaxQty units
	UnitPrice int64  // minor units (fen)

	Concurrency    int           // C: HTTP requests in flight at once, over all buyers
	ArrivalWindow  time.Duration // first-wave arrivals spread uniformly over this window
	PaymentTimeout time.Duration // the SKU's payment window, so every order's
	ActWithin      float64       // pay/cancel happens at a uniform time in [0, ActWithin×PaymentTimeout] after ordering

	PayRatio    float64       // share of locked orders that pay
	CancelRatio float64       // share of locked orders that cancel; the rest time out
	RetryRatio  float64       // share of rejected/closed/cancelled buyers who order again
	MaxRetries  int           // most extra orders one buyer places
	RetryDelay  time.Duration // a returning buyer thinks for up to this long

	// Gate arms the SKU's flash-sale gate (Redis) GateLead before the sale opens, as the seed
	// prewarms ten minutes ahead; buyers it answers sold_out cost no order. Without Redis the
	// stock service answers gate_unavailable and the sale takes the database path.
	Gate     bool
	GateLead time.Duration

	SampleInterval time.Duration // water-level sampling period
	SettleTimeout  time.Duration // how long to wait for slow orders to reach a terminal status
	ChartPath      string        // PNG of the water level; empty: no chart
	TableStep      int           // water-level table shows every k-th sample; 0: at most ~40 rows
	Seed           uint64        // random seed; 0: random

	HTTPClient *http.Client // nil: one sized for Concurrency
	// Signer mints the requests' bearer tokens (the identity provider's key); nil: none.
	Signer *auth.Signer
}

// Default returns the demo's configuration: the article's promotion, scaled in time.
func Default() Config {
	return Config{
		OrderURL:      "http://127.0.0.1:8081",
		StockURL:      "http://127.0.0.1:8082",
		PaymentURL:    "http://127.0.0.1:8083",
		SandboxSecret: "sandbox-secret",
		Provider:      "sandbox",
		PaysimURL:     "http://127.0.0.1:18083",
		// The article's promotion: 5,000 units, 4,250 buyers lock (85%), ~78% pay, the rest
		// cancel or time out, scaled in time: arrivals over 90 s and a 15 s payment window
		// instead of 30 minutes.
		Units:          5000,
		Buyers:         4250,
		MaxQty:         1,
		UnitPrice:      9900,
		Concurrency:    24,
		ArrivalWindow:  90 * time.Second,
		PaymentTimeout: 15 * time.Second,
		ActWithin:      0.8,
		PayRatio:       0.781,
		CancelRatio:    0.035,
		RetryRatio:     0.3,
		MaxRetries:     1,
		RetryDelay:     3 * time.Second,
		Gate:           true,
		GateLead:       5 * time.Second, // ten minutes, at the 15 s ↔ 30 min scale of the window
		SampleInterval: time.Second,
		SettleTimeout:  30 * time.Second,
		ChartPath:      ".run/flashsale.png",
	}
}

// RegisterFlags binds c's fields to flags on fs, with c's current values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.OrderURL, "order-url", c.OrderURL, "order service base URL")
	fs.StringVar(&c.StockURL, "stock-url", c.StockURL, "stock service base URL")
	fs.StringVar(&c.PaymentURL, "payment-url", c.PaymentURL, "payment-adapter base URL")
	fs.StringVar(&c.SandboxSecret, "sandbox-secret", c.SandboxSecret, "sandbox callback HMAC secret (env PAYMENT_SANDBOX_SECRET)")
	fs.StringVar(&c.Provider, "provider", c.Provider, "who buyers pay through: sandbox, stripe, wechatpay or alipay (the last three through paysim)")
	fs.StringVar(&c.PaysimURL, "paysim-url", c.PaysimURL, "paysim's control API, for -provider stripe, wechatpay or alipay")
	fs.StringVar(&c.SKU, "sku", c.SKU, "SKU to create (default FLASH-<random>)")
	fs.Int64Var(&c.Units, "units", c.Units, "N: units on sale")
	fs.IntVar(&c.Buyers, "buyers", c.Buyers, "M: first-wave buyers")
	fs.Int64Var(&c.MaxQty, "max-qty", c.MaxQty, "each order takes 1..max-qty units")
	fs.Int64Var(&c.UnitPrice, "unit-price", c.UnitPrice, "unit price in minor units")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "C: HTTP requests in flight")
	fs.DurationVar(&c.ArrivalWindow, "arrival-window", c.ArrivalWindow, "first-wave arrivals spread over this window")
	fs.DurationVar(&c.PaymentTimeout, "payment-timeout", c.PaymentTimeout, "the SKU's payment window (the order service's ORDER_MIN_PAYMENT_WINDOW bounds it)")
	fs.Float64Var(&c.ActWithin, "act-within", c.ActWithin, "pay/cancel within this fraction of the payment timeout")
	fs.Float64Var(&c.PayRatio, "pay-ratio", c.PayRatio, "share of locked orders that pay")
	fs.Float64Var(&c.CancelRatio, "cancel-ratio", c.CancelRatio, "share of locked orders that cancel (the rest time out)")
	fs.Float64Var(&c.RetryRatio, "retry-ratio", c.RetryRatio, "share of rejected/closed/cancelled buyers who order again")
	fs.IntVar(&c.MaxRetries, "max-retries", c.MaxRetries, "most extra orders per buyer")
	fs.DurationVar(&c.RetryDelay, "retry-delay", c.RetryDelay, "a returning buyer waits up to this long")
	fs.BoolVar(&c.Gate, "gate", c.Gate, "arm the SKU's flash-sale gate (Redis) before the sale")
	fs.DurationVar(&c.GateLead, "gate-lead", c.GateLead, "arm the gate this long before the sale opens")
	fs.DurationVar(&c.SampleInterval, "sample-interval", c.SampleInterval, "water-level sampling period")
	fs.DurationVar(&c.SettleTimeout, "settle-timeout", c.SettleTimeout, "bounded wait for orders to reach a terminal status")
	fs.StringVar(&c.ChartPath, "chart", c.ChartPath, "water-level chart (PNG); empty: none")
	fs.IntVar(&c.TableStep, "table-step", c.TableStep, "water-level table shows every k-th sample (0: auto)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed (0: random)")
}

// Validate reports the first unusable field.
func (c Config) Validate() error {
	switch {
	case c.OrderURL == "" || c.StockURL == "" || c.PaymentURL == "":
		return errors.New("order, stock and payment URLs are required")
	case !slices.Contains([]string{"sandbox", "stripe", "wechatpay", "alipay"}, c.Provider):
		return fmt.Errorf("provider %q: want sandbox, stripe, wechatpay or alipay", c.Provider)
	case c.Provider != "sandbox" && c.PaysimURL == "":
		return errors.New("-provider " + c.Provider + " pays through paysim: -paysim-url is required")
	case c.Units < 0:
		return errors.New("units must be >= 0")
	case c.Buyers < 1:
		return errors.New("buyers must be >= 1")
	case c.MaxQty < 1:
		return errors.New("max-qty must be >= 1")
	case c.UnitPrice < 1:
		return errors.New("unit-price must be >= 1")
	case c.Concurrency < 1:
		return errors.New("concurrency must be >= 1")
	case c.ArrivalWindow < 0:
		return errors.New("arrival-window must be >= 0")
	case c.PaymentTimeout < time.Second:
		return errors.New("payment-timeout must be >= 1s")
	case c.GateLead < 0:
		return errors.New("gate-lead must be >= 0")
	case c.ActWithin < 0 || c.ActWithin > 1:
		return errors.New("act-within must be within [0, 1]")
	case c.PayRatio < 0 || c.CancelRatio < 0 || c.PayRatio+c.CancelRatio > 1:
		return errors.New("pay-ratio and cancel-ratio must be >= 0 and add up to at most 1")
	case c.RetryRatio < 0 || c.RetryRatio > 1:
		return errors.New("retry-ratio must be within [0, 1]")
	case c.MaxRetries < 0:
		return errors.New("max-retries must be >= 0")
	case c.SampleInterval <= 0:
		return errors.New("sample-interval must be > 0")
	case c.SettleTimeout <= 0:
		return errors.New("settle-timeout must be > 0")
	}
	return nil
}

// terminal are the statuses an order of the sale is expected to end in.
var terminal = map[string]bool{"paid": true, "rejected": true, "closed": true, "cancelled": true, "refunded": true, "shipped": true}

// orderRecord is what the simulator knows about one order it placed.
type orderRecord struct {
	ID        string
	Buyer     int
	Attempt   int
	Qty       int64
	Placed    time.Time
	Intent    string // pay | cancel | timeout, once the order awaited payment
	PaidOK    bool   // the payment callback was acknowledged
	CancelOK  bool   // the cancel was accepted
	Refused   bool   // the cancel was refused (the order had moved on)
	Missed    bool   // the order closed before its buyer ever saw it awaiting payment
	mu        sync.Mutex
	lockLag   time.Duration // pending → awaiting_payment, by the order's own history
	status    string
	history   []string
	expiresAt time.Time
}

func (r *orderRecord) observe(o OrderView) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = o.Status
	r.history = r.history[:0]
	for _, h := range o.History {
		r.history = append(r.history, h.Status)
		if h.Status == "awaiting_payment" && len(o.History) > 0 && r.lockLag == 0 {
			r.lockLag = h.At.Sub(o.History[0].At)
		}
	}
	if !o.ExpiresAt.IsZero() {
		r.expiresAt = o.ExpiresAt
	}
}

// settled reports whether the order is done moving: terminal, and, once its payment was
// acknowledged, paid or refunded — a closed order whose payment is still on its way will be
// re-sold (or refunded) by the late-payment path.
func (r *orderRecord) settled(status string) bool {
	if r.PaidOK {
		return status == "paid" || status == "shipped" || status == "refunded"
	}
	return terminal[status]
}

func (r *orderRecord) snapshot() (status string, history []string, expires time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status, slices.Clone(r.history), r.expiresAt
}

type sim struct {
	cfg   Config
	c     *Client
	sku   string
	runID string
	start time.Time
	sem   chan struct{}
	bar   *progressbar.ProgressBar
	logw  io.Writer

	mu      sync.Mutex
	orders  []*orderRecord
	errs    []string
	nerrs   int
	samples []Sample
	lagPeak float64 // the deepest stock's order.created consumer fell behind, by /metrics

	gate                    string // the gate as the sale opened: armed, unavailable or off
	turnedAway              atomic.Int64
	created, awaiting, paid atomic.Int64
	calls                   atomic.Int64
}

// Run runs the flash sale described by cfg, writing a live progress bar and phase notes to
// progress (nil: silent), and returns the report. The error is non-nil when the sale could not
// be run or when any check failed (then Report.Failed() is true as well).
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("flash sale config: %w", err)
	}
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Seed == 0 {
		cfg.Seed = mrand.Uint64()
	}
	s := &sim{cfg: cfg, c: newClient(cfg), sku: cfg.SKU, runID: randomHex(4), sem: make(chan struct{}, cfg.Concurrency), logw: progress, gate: "off"}
	if s.sku == "" {
		s.sku = "FLASH-" + s.runID
	}
	s.logf("flash sale %s: %d units, %d buyers, concurrency %d, payment timeout %s, arrivals over %s",
		s.sku, cfg.Units, cfg.Buyers, cfg.Concurrency, cfg.PaymentTimeout, cfg.ArrivalWindow)
	if err := s.c.CreateSKU(ctx, s.sku, cfg.Units); err != nil {
		return nil, fmt.Errorf("flash sale: %w", err)
	}
	// The sale's terms are the order service's: its price and, a promotion's, its window.
	if err := s.c.SetPrice(ctx, s.sku, cfg.UnitPrice, "CNY", cfg.PaymentTimeout); err != nil {
		return nil, fmt.Errorf("flash sale: %w", err)
	}
	if cfg.Gate {
		if err := s.armGate(ctx); err != nil {
			return nil, fmt.Errorf("flash sale: %w", err)
		}
	}
	metricsBefore, metricsErr := s.c.stockMetrics(ctx)
	s.start = time.Now()

	s.bar = progressbar.NewOptions(cfg.Buyers,
		progressbar.OptionSetWriter(progress),
		progressbar.OptionSetDescription("buyers"),
		progressbar.OptionSetWidth(28),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
	)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); s.sample(sampleCtx) }()

	s.drive(ctx)
	_ = s.bar.Finish()
	fmt.Fprintln(progress)
	buyersDone := time.Since(s.start)

	s.logf("settling: waiting up to %s for orders still moving", cfg.SettleTimeout)
	s.settle(ctx)
	overdueSeen := s.waitOverdue(ctx)
	stopSampling()
	<-sampled

	rep := s.report(ctx, buyersDone, overdueSeen)
	rep.Metrics = s.metricFigures(ctx, metricsBefore, metricsErr)
	rep.Checks = append(rep.Checks, rep.metricsCheck())
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	if cfg.ChartPath != "" {
		if err := writeChart(cfg.ChartPath, s.sku, rep.Samples); err != nil {
			rep.ChartErr = err.Error()
		} else {
			rep.ChartPath = cfg.ChartPath
		}
	}
	if rep.Failed() {
		return rep, fmt.Errorf("flash sale %s: %d of %d checks failed", s.sku, rep.failedChecks(), len(rep.Checks))
	}
	return rep, nil
}

func (s *sim) logf(format string, args ...any) {
	fmt.Fprintf(s.logw, format+"\n", args...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// armGate arms the SKU's gate now and waits GateLead for the sale to open. A stock service
// without Redis (gate_unavailable) is noted, not an error: orders take the database path.
func (s *sim) armGate(ctx context.Context) error {
	_, err := s.c.Do(ctx, "arm gate "+s.sku, http.MethodPost, s.c.stockURL+"/v1/skus/"+url.PathEscape(s.sku)+"/gate", nil, nil, nil)
	var ae *APIError
	switch {
	case errors.As(err, &ae) && ae.Code == "gate_unavailable":
		s.gate = "unavailable"
		s.logf("gate unavailable (the stock service has no Redis): every order takes the database path")
		return nil
	case err != nil:
		return err
	}
	s.gate = "armed"
	s.logf("gate armed with %d units; the sale opens in %s (the seed's ten minutes, scaled)", s.cfg.Units, s.cfg.GateLead)
	if !sleepUntil(ctx, time.Now().Add(s.cfg.GateLead)) {
		return ctx.Err()
	}
	return nil
}

// drive releases the first-wave buyers at their arrival times and waits for every buyer.
func (s *sim) drive(ctx context.Context) {
	rng := mrand.New(mrand.NewPCG(s.cfg.Seed, 0))
	arrivals := make([]time.Duration, s.cfg.Buyers)
	for i := range arrivals {
		if s.cfg.ArrivalWindow > 0 {
			arrivals[i] = time.Duration(rng.Int64N(int64(s.cfg.ArrivalWindow)))
		}
	}
	slices.Sort(arrivals)
	var wg sync.WaitGroup
	for i, at := range arrivals {
		if !sleepUntil(ctx, s.start.Add(at)) {
			break
		}
		wg.Go(func() {
			defer func() { _ = s.bar.Add(1) }()
			s.buyer(ctx, i, mrand.New(mrand.NewPCG(s.cfg.Seed, uint64(i)+1)))
		})
	}
	wg.Wait()
}

// buyer is one person: orders, and after a rejection, a close or a cancel, may come back.
func (s *sim) buyer(ctx context.Context, i int, rng *mrand.Rand) {
	for attempt := 0; ; attempt++ {
		final := s.attempt(ctx, i, attempt, rng)
		if ctx.Err() != nil {
			return
		}
		if final != "rejected" && final != "sold_out" && final != "closed" && final != "cancelled" {
			return
		}
		if attempt >= s.cfg.MaxRetries || rng.Float64() >= s.cfg.RetryRatio {
			return
		}
		if !sleepUntil(ctx, time.Now().Add(randDuration(rng, s.cfg.RetryDelay))) {
			return
		}
	}
}

// attempt places one order and plays it out; it returns the order's last seen status.
func (s *sim) attempt(ctx context.Context, buyer, attempt int, rng *mrand.Rand) string {
	cfg := s.cfg
	qty := 1 + rng.Int64N(cfg.MaxQty)
	u := rng.Float64()
	actAt := time.Duration(rng.Float64() * cfg.ActWithin * float64(cfg.PaymentTimeout))
	key := fmt.Sprintf("fs-%s-%d-%d", s.runID, buyer, attempt)
	items := []orderItem{{SKU: s.sku, Qty: qty, UnitPrice: cfg.UnitPrice}}

	var o OrderView
	placed := time.Now()
	// Retrying with the same Idempotency-Key returns the same order, never a second one.
	err := s.retry(ctx, placed.Add(cfg.SettleTimeout), func() error {
		var err error
		o, err = s.c.placeOrder(ctx, key, fmt.Sprintf("fs-%s-%d", s.runID, buyer), items)
		return err
	})
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict && ae.Code == "sold_out" {
		s.turnedAway.Add(1) // the gate said no: no order, no row, no event
		return "sold_out"
	}
	if err != nil {
		s.fail(err)
		return ""
	}
	rec := &orderRecord{ID: o.OrderID, Buyer: buyer, Attempt: attempt, Qty: qty, Placed: placed}
	rec.observe(o)
	s.mu.Lock()
	s.orders = append(s.orders, rec)
	s.mu.Unlock()
	s.created.Add(1)

	o, err = s.waitFor(ctx, rec, func(st string) bool { return st != "pending" }, 200*time.Millisecond, placed.Add(cfg.SettleTimeout))
	if err != nil || o.Status != "awaiting_payment" {
		if _, h, _ := rec.snapshot(); slices.Contains(h, "awaiting_payment") {
			rec.Missed = true
		}
		return o.Status
	}
	s.awaiting.Add(1)
	deadline := placed.Add(cfg.PaymentTimeout)
	switch {
	case u < cfg.PayRatio:
		rec.Intent = "pay"
		if !sleepUntil(ctx, placed.Add(actAt)) {
			return o.Status
		}
		pay := s.c.payment(rec.ID, "fs-txn-"+rec.ID, o.Total)
		err := s.retry(ctx, deadline.Add(cfg.SettleTimeout/2), func() error { return pay(ctx) })
		if err != nil {
			s.fail(err)
		} else {
			rec.PaidOK = true
		}
	case u < cfg.PayRatio+cfg.CancelRatio:
		rec.Intent = "cancel"
		if !sleepUntil(ctx, placed.Add(actAt)) {
			return o.Status
		}
		err := s.retry(ctx, deadline.Add(cfg.SettleTimeout/2), func() error { return s.c.cancel(ctx, rec.ID) })
		var ae *APIError
		switch {
		case err == nil:
			rec.CancelOK = true
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			rec.Refused = true // the deadline won the race: not an error
		default:
			s.fail(err)
		}
	default:
		rec.Intent = "timeout"
		if !sleepUntil(ctx, deadline) {
			return o.Status
		}
	}
	o, _ = s.waitFor(ctx, rec, rec.settled, 150*time.Millisecond, deadline.Add(cfg.SettleTimeout))
	if o.Status == "paid" {
		s.paid.Add(1)
	}
	return o.Status
}

// call runs one HTTP exchange under the concurrency limit.
func (s *sim) call(ctx context.Context, f func() error) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	s.calls.Add(1)
	return f()
}

// retry calls f until it succeeds, fails for good, or until passes. A 503 (the payment
// adapter's order_unknown: it has not seen the order yet) counts as transient.
func (s *sim) retry(ctx context.Context, until time.Time, f func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := s.call(ctx, f)
		if err == nil || !transient(err) || time.Now().After(until) {
			return err
		}
		if !sleepUntil(ctx, time.Now().Add(wait)) {
			return ctx.Err()
		}
		wait = min(wait*2, time.Second)
	}
}

// waitFor polls the order until done(status) holds or until passes, backing off from first
// to two seconds between polls (thousands of buyers polling faster take CPU from the system
// under test). It returns the last view it got.
func (s *sim) waitFor(ctx context.Context, rec *orderRecord, done func(string) bool, first time.Duration, until time.Time) (OrderView, error) {
	wait := first
	var last OrderView
	last.Status, _, _ = rec.snapshot()
	for {
		if !sleepUntil(ctx, time.Now().Add(wait)) {
			return last, ctx.Err()
		}
		err := s.call(ctx, func() error {
			o, err := s.c.Order(ctx, rec.ID)
			if err == nil {
				last = o
				rec.observe(o)
			}
			return err
		})
		if err != nil && !transient(err) {
			s.fail(err)
			return last, err
		}
		if err == nil && done(last.Status) {
			return last, nil
		}
		if time.Now().After(until) {
			return last, fmt.Errorf("order %s still %s", rec.ID, last.Status)
		}
		wait = min(wait*3/2, 2*time.Second)
	}
}

// settle gives every order not yet terminal up to SettleTimeout to get there.
func (s *sim) settle(ctx context.Context) {
	until := time.Now().Add(s.cfg.SettleTimeout)
	var wg sync.WaitGroup
	for _, rec := range s.records() {
		if st, _, _ := rec.snapshot(); rec.settled(st) {
			continue
		}
		wg.Go(func() {
			_, _ = s.waitFor(ctx, rec, rec.settled, 0, until)
		})
	}
	wg.Wait()
}

// waitOverdue waits until a few seconds past the last payment deadline of the sale, then up
// to ten seconds for the stock service to hold no lock past its deadline. It returns the last
// overdue-locks answer.
func (s *sim) waitOverdue(ctx context.Context) overdue {
	var last time.Time
	for _, rec := range s.records() {
		_, _, exp := rec.snapshot()
		if exp.IsZero() {
			exp = rec.Placed.Add(s.cfg.PaymentTimeout)
		}
		if exp.After(last) {
			last = exp
		}
	}
	if wait := time.Until(last.Add(3 * time.Second)); wait > 0 {
		s.logf("waiting %s past the last payment deadline", wait.Round(100*time.Millisecond))
		sleepUntil(ctx, last.Add(3*time.Second))
	}
	var o overdue
	until := time.Now().Add(10 * time.Second)
	for {
		var err error
		o, err = s.c.overdueLocks(ctx, 2*time.Second)
		if err != nil {
			s.fail(err)
			o.Count = -1
		}
		if (err == nil && o.Count == 0) || time.Now().After(until) || ctx.Err() != nil {
			return o
		}
		sleepUntil(ctx, time.Now().Add(200*time.Millisecond))
	}
}

// sample records the SKU's quantities every SampleInterval until ctx ends, and describes them
// on the progress bar.
func (s *sim) sample(ctx context.Context) {
	tick := time.NewTicker(s.cfg.SampleInterval)
	defer tick.Stop()
	for {
		s.takeSample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *sim) takeSample(ctx context.Context) {
	f, err := s.c.SKU(ctx, s.sku)
	if err != nil {
		if ctx.Err() == nil {
			s.fail(err)
		}
		return
	}
	smp := Sample{At: time.Since(s.start), OnHand: f.OnHand, Available: f.Available, Locked: f.Locked, Sold: f.Sold,
		Orders: s.created.Load(), Paid: s.paid.Load()}
	m, merr := s.c.stockMetrics(ctx) // its failure shows in the report's last scrape
	s.mu.Lock()
	s.samples = append(s.samples, smp)
	if merr == nil {
		s.lagPeak = max(s.lagPeak, m.lag)
	}
	s.mu.Unlock()
	if s.bar != nil && !s.bar.IsFinished() {
		s.bar.Describe(fmt.Sprintf("available %d  locked %d  sold %d  orders %d", f.Available, f.Locked, f.Sold, smp.Orders))
	}
}

// metricFigures scrapes stock's /metrics once more and makes the sale's figures of it.
func (s *sim) metricFigures(ctx context.Context, before stockMetrics, beforeErr error) MetricFigures {
	after, err := s.c.stockMetrics(ctx)
	if err = errors.Join(beforeErr, err); err != nil {
		return MetricFigures{Err: err.Error()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return metricDelta(before, after, s.lagPeak)
}

func (s *sim) records() []*orderRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.orders)
}

// fail records an unexpected API error; the first few are kept for the report.
func (s *sim) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nerrs++
	if len(s.errs) < 10 {
		s.errs = append(s.errs, err.Error())
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

func randDuration(rng *mrand.Rand, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(max)))
}

// EnvSecret is the sandbox secret from PAYMENT_SANDBOX_SECRET, or the default.
func EnvSecret(getenv func(string) string) string {
	if v := getenv("PAYMENT_SANDBOX_SECRET"); v != "" {
		return v
	}
	return "sandbox-secret"
}
