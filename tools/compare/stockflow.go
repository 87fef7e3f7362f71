package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/tools/flashsale"
)

// unitPrice is the sale's price, in fen.
const unitPrice = 9900

// terminal are the statuses a sale's order ends in.
var terminal = []string{"paid", "rejected", "closed", "cancelled", "refunded", "shipped"}

// sfRun is the stockflow design's sale: the real services, through their public APIs.
type sfRun struct {
	*designRun
	c   *flashsale.Client
	sku string
	sem chan struct{} // HTTP requests in flight, like the naive designs' connection pool

	mu     sync.Mutex
	orders []*sfOrder
	errs   []error
}

// sfOrder is one buyer's order as last seen.
type sfOrder struct {
	b    buyer
	id   string
	view flashsale.OrderView
}

// runStockflow runs the sale on stockflow: a fresh SKU with Units units on sale at a payment
// window of Deadline; each buyer places an order through POST /v1/orders with their own
// token; stock locks a unit or rejects the order; payers pay through the sandbox provider's
// signed callback (as tools/flashsale does); the timeout service releases the rest at their
// deadline. The books are stock's own: GET /v1/skus/{sku}.
func runStockflow(ctx context.Context, d *designRun, sku string) error {
	cfg := d.cfg
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = poolSize + 8
		hc = &http.Client{Transport: tr, Timeout: 15 * time.Second}
	}
	s := &sfRun{designRun: d, sku: sku, sem: make(chan struct{}, poolSize),
		c: flashsale.NewClient(hc, cfg.OrderURL, cfg.StockURL, cfg.PaymentURL, cfg.SandboxSecret).WithSigner(cfg.Signer)}
	if err := s.c.CreateSKU(ctx, sku, cfg.Units); err != nil {
		return err
	}
	if err := s.c.SetPrice(ctx, sku, unitPrice, "CNY", cfg.Deadline); err != nil {
		return err
	}
	var peak int64 // the most units stock ever had out (locked + sold)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	var sampling sync.WaitGroup
	sampling.Go(func() {
		d.sampleEvery(sampleCtx, func(ctx context.Context) error {
			f, err := s.c.SKU(ctx, sku)
			if err == nil {
				d.sample(f.Available, f.Locked, f.Sold)
				peak = max(peak, f.Locked+f.Sold)
			}
			return err
		})
	})

	buy := func(b buyer) { s.buy(ctx, b) }
	runWave(ctx, d.first, buy)
	var last time.Time
	for _, o := range s.snapshot() {
		if o.b.wave == 1 && o.view.ExpiresAt.After(last) && slices.Contains(o.history(), "awaiting_payment") {
			last = o.view.ExpiresAt
		}
	}
	d.logf("%s: first wave over; the second comes at its last deadline + %s", d.design.Name, cfg.Grace)
	if !pause(ctx, time.Until(last.Add(cfg.Grace))) {
		return ctx.Err()
	}
	runWave(ctx, d.second, buy)

	// The end: every order settled, then every lock resolved — or Settle is up, and what is
	// still locked is stuck.
	until := time.Now().Add(cfg.Settle)
	unsettled := s.settle(ctx, until)
	f, err := s.c.SKU(ctx, sku)
	for err == nil && f.Locked > 0 && time.Now().Before(until) && pause(ctx, 200*time.Millisecond) {
		f, err = s.c.SKU(ctx, sku)
	}
	stopSampling()
	sampling.Wait()
	if err != nil {
		return fmt.Errorf("read the SKU at the end: %w", err)
	}
	d.sample(f.Available, f.Locked, f.Sold)
	if len(s.errs) > 0 {
		return fmt.Errorf("%d calls failed, the first: %w", len(s.errs), s.errs[0])
	}

	t := &truth{units: cfg.Units}
	var paidOrders int64
	for _, o := range s.snapshot() {
		h := o.history()
		switch {
		case o.view.Status == "paid":
			paidOrders++
		case o.view.Status == "rejected":
			t.refused(o.at("rejected"))
		}
		if slices.Contains(h, "awaiting_payment") || o.view.Status == "paid" {
			t.held(hold{wave: o.b.wave, asked: o.at("pending"), deadline: o.view.ExpiresAt, paid: o.view.Status == "paid"})
		}
	}
	tl := t.tally()
	res := Result{
		Sold:           f.Sold,
		Oversold:       max(0, peak-cfg.Units, f.Locked+f.Sold-cfg.Units, paidOrders-cfg.Units),
		Stuck:          f.Locked,
		TurnedAway:     tl.refusedWhileFree,
		SecondWaveSold: tl.secondWavePaid,
		Orders:         tl.holds,
	}
	d.rep.result(d.design, res, tl.refused, paidOrders)
	if unsettled > 0 {
		d.rep.defect(fmt.Sprintf("%d orders not settled %s after the sale", unsettled, cfg.Settle))
	}
	return nil
}

// buy is one buyer: places an order for one unit, waits for stock's answer, and pays when
// the plan says so.
func (s *sfRun) buy(ctx context.Context, b buyer) {
	id := fmt.Sprintf("cmp-%s-%d-%d", s.runID, b.wave, b.n)
	tok, err := s.cfg.Signer.Mint(id, []auth.Role{auth.Buyer}, id, time.Hour)
	if err != nil {
		s.fail(err)
		return
	}
	o := &sfOrder{b: b}
	body := map[string]any{"buyer_id": id, "items": []map[string]any{{"sku": s.sku, "qty": 1}}, "currency": "CNY"}
	headers := map[string]string{"Authorization": "Bearer " + tok, "Idempotency-Key": id}
	until := time.Now().Add(s.cfg.Settle)
	if err := s.send(ctx, until, "place order", http.MethodPost, s.cfg.OrderURL+"/v1/orders", body, headers, &o.view); err != nil {
		s.fail(err)
		return
	}
	o.id = o.view.OrderID
	s.mu.Lock()
	s.orders = append(s.orders, o)
	s.mu.Unlock()
	if err := s.waitFor(ctx, o, until, "awaiting_payment", "rejected"); err != nil || o.view.Status != "awaiting_payment" || !b.pays {
		return
	}
	if !pause(ctx, time.Until(o.at("awaiting_payment").Add(b.payAfter))) {
		return
	}
	raw, err := json.Marshal(map[string]any{"provider_txn_id": "cmp-txn-" + o.id, "order_id": o.id, "amount": o.view.Total, "currency": "CNY", "status": "succeeded"})
	if err != nil {
		s.fail(err)
		return
	}
	sig := map[string]string{"X-Sandbox-Signature": flashsale.Sign(raw, []byte(s.cfg.SandboxSecret))}
	// The adapter answers 503 order_unknown until it has consumed the order's order.created;
	// a provider retries such a callback, past the payment deadline too (the order then takes a
	// late payment), and so does this buyer's, until the run settles.
	if err := s.send(ctx, until, "pay order "+o.id, http.MethodPost, s.cfg.PaymentURL+"/v1/callbacks/sandbox", raw, sig, nil); err != nil {
		s.fail(err)
	}
}

// settle waits until every order is in a terminal status, or until; it returns how many
// are not.
func (s *sfRun) settle(ctx context.Context, until time.Time) int {
	var wg sync.WaitGroup
	for _, o := range s.snapshot() {
		wg.Go(func() { _ = s.waitFor(ctx, o, until, terminal...) })
	}
	wg.Wait()
	n := 0
	for _, o := range s.snapshot() {
		if !slices.Contains(terminal, o.view.Status) {
			n++
		}
	}
	return n
}

// waitFor polls the order until its status is one of want or until, backing off from 100 ms
// to a second (hundreds of buyers polling faster take the CPU from the system they wait on).
func (s *sfRun) waitFor(ctx context.Context, o *sfOrder, until time.Time, want ...string) error {
	wait := 100 * time.Millisecond
	for !slices.Contains(want, o.status()) {
		if time.Now().After(until) {
			return fmt.Errorf("order %s still %s", o.id, o.status())
		}
		if !pause(ctx, wait) {
			return ctx.Err()
		}
		var v flashsale.OrderView
		err := s.send(ctx, time.Time{}, "get order "+o.id, http.MethodGet, s.cfg.OrderURL+"/v1/orders/"+url.PathEscape(o.id), nil, nil, &v)
		if err != nil && !transient(err) {
			s.fail(err)
			return err
		}
		if err == nil {
			o.view = v
		}
		wait = min(wait*3/2, time.Second)
	}
	return nil
}

// send makes one request through the client, among at most poolSize in flight, and repeats
// it after a transient failure for as long as the next try starts before until (a zero until:
// one try). An order's creation is safe to repeat — its Idempotency-Key names it — and so is
// a provider's callback.
func (s *sfRun) send(ctx context.Context, until time.Time, op, method, u string, body any, headers map[string]string, out any) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := s.c.Do(ctx, op, method, u, body, headers, out)
		<-s.sem
		if err == nil || !transient(err) || !time.Now().Add(wait).Before(until) || !pause(ctx, wait) {
			return err
		}
	}
}

// transient reports whether err is worth repeating the request for: a transport error, a
// 5xx (the adapter's order_unknown while it has not seen the order yet) or a 429.
func transient(err error) bool {
	var ae *flashsale.APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

func (s *sfRun) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

// snapshot is the orders placed so far. An order is read and polled by one goroutine at a
// time — its buyer's, then, once the buyers are done, the settling's — so its view needs no
// lock of its own.
func (s *sfRun) snapshot() []*sfOrder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.orders)
}

func (o *sfOrder) status() string { return o.view.Status }

func (o *sfOrder) history() []string {
	var h []string
	for _, e := range o.view.History {
		h = append(h, e.Status)
	}
	return h
}

// at is when the order service moved the order to status (its clock); the zero time when it
// never did.
func (o *sfOrder) at(status string) time.Time {
	for _, e := range o.view.History {
		if e.Status == status {
			return e.At
		}
	}
	return time.Time{}
}
