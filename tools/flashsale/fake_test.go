package flashsale

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeStockflow is an in-memory stand-in for the three public APIs the simulator uses, with
// the asynchrony of the real system (a lock, a release and a sale land a few ms after the
// request) and its contract: conditional locks, a ledger row per transition, deadlines that
// release, sandbox signatures. oversell breaks the lock condition, so the checks have
// something to catch.
type fakeStockflow struct {
	t        testing.TB
	secret   string
	oversell bool
	unknown  int  // answer the first n payment callbacks with 503 order_unknown
	miscount bool // /metrics counts every lock twice

	mu     sync.Mutex
	skus   map[string]*figures
	ledger map[string][]ledgerEntry
	orders map[string]*fakeOrder
	keys   map[string]string
	prices map[string]fakePrice
	nextID int64
	locks  map[string]time.Time // order id -> deadline, while locked
}

type fakePrice struct {
	unitPrice int64
	window    time.Duration
}

type fakeOrder struct {
	id, sku string
	qty     int64
	total   int64
	status  string
	history []string
	expires time.Time
}

func newFake(t testing.TB, secret string) (*fakeStockflow, *httptest.Server) {
	f := &fakeStockflow{t: t, secret: secret, skus: map[string]*figures{}, ledger: map[string][]ledgerEntry{},
		orders: map[string]*fakeOrder{}, keys: map[string]string{}, locks: map[string]time.Time{}, prices: map[string]fakePrice{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/skus", f.createSKU)
	mux.HandleFunc("GET /v1/skus/{sku}", f.getSKU)
	mux.HandleFunc("GET /v1/skus/{sku}/ledger", f.getLedger)
	mux.HandleFunc("POST /v1/admin/verify", f.verify)
	mux.HandleFunc("GET /v1/admin/overdue-locks", f.overdue)
	mux.HandleFunc("PUT /v1/prices/{sku}", f.putPrice)
	mux.HandleFunc("POST /v1/orders", f.placeOrder)
	mux.HandleFunc("GET /v1/orders/{id}", f.getOrder)
	mux.HandleFunc("POST /v1/orders/{id}/cancel", f.cancel)
	mux.HandleFunc("POST /v1/callbacks/sandbox", f.callback)
	mux.HandleFunc("GET /metrics", f.metrics)
	mux.HandleFunc("POST /v1/skus/{sku}/gate", func(w http.ResponseWriter, _ *http.Request) {
		writeErr(w, http.StatusServiceUnavailable, "gate_unavailable") // a stock service without Redis
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": code}})
}

// move applies d to the SKU and appends a ledger row; the caller holds mu.
func (f *fakeStockflow) move(sku, change, orderID string, qty int64, d figures) {
	s := f.skus[sku]
	before := *s
	s.OnHand += d.OnHand
	s.Locked += d.Locked
	s.Sold += d.Sold
	s.Available = s.OnHand - s.Locked - s.Sold
	f.nextID++
	f.ledger[sku] = append(f.ledger[sku], ledgerEntry{ID: f.nextID, ChangeType: change, Qty: qty, OrderID: orderID, Before: before, After: *s})
}

func (o *fakeOrder) set(status string) {
	o.status = status
	o.history = append(o.history, status)
}

func (f *fakeStockflow) createSKU(w http.ResponseWriter, r *http.Request) {
	var in struct {
		SKU    string `json:"sku"`
		OnHand int64  `json:"on_hand"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeErr(w, 400, "malformed_json")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.skus[in.SKU]; ok {
		writeErr(w, 409, "sku_exists")
		return
	}
	f.skus[in.SKU] = &figures{}
	f.move(in.SKU, "stocktake", "", in.OnHand, figures{OnHand: in.OnHand})
	writeJSON(w, 201, f.skus[in.SKU])
}

func (f *fakeStockflow) getSKU(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.skus[r.PathValue("sku")]
	if !ok {
		writeErr(w, 404, "sku_not_found")
		return
	}
	writeJSON(w, 200, SKUFigures{SKU: r.PathValue("sku"), OnHand: s.OnHand, Available: s.Available, Locked: s.Locked, Sold: s.Sold})
}

func (f *fakeStockflow) getLedger(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit < 1 || limit > 1000 {
		writeErr(w, 400, "invalid_limit")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	page := []ledgerEntry{}
	for _, e := range f.ledger[r.PathValue("sku")] {
		if e.ID > after && len(page) < limit {
			page = append(page, e)
		}
	}
	out := map[string]any{"entries": page}
	if len(page) == limit {
		out["next_after"] = page[len(page)-1].ID
	}
	writeJSON(w, 200, out)
}

func (f *fakeStockflow) verify(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	diffs := []map[string]any{}
	for sku, s := range f.skus {
		var fold figures
		for _, e := range f.ledger[sku] {
			fold.OnHand += e.After.OnHand - e.Before.OnHand
			fold.Locked += e.After.Locked - e.Before.Locked
			fold.Sold += e.After.Sold - e.Before.Sold
		}
		if fold.OnHand != s.OnHand || fold.Locked != s.Locked || fold.Sold != s.Sold {
			diffs = append(diffs, map[string]any{"sku": sku, "check": "ledger_fold"})
		}
	}
	writeJSON(w, 200, map[string]any{"consistent": len(diffs) == 0, "differences": diffs})
}

func (f *fakeStockflow) overdue(w http.ResponseWriter, r *http.Request) {
	grace, err := time.ParseDuration(r.URL.Query().Get("grace"))
	if err != nil {
		writeErr(w, 400, "invalid_grace")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := []string{}
	for id, dl := range f.locks {
		if time.Now().Add(-grace).After(dl) {
			ids = append(ids, id)
		}
	}
	writeJSON(w, 200, map[string]any{"count": len(ids), "orders": ids})
}

func (f *fakeStockflow) putPrice(w http.ResponseWriter, r *http.Request) {
	var in struct {
		UnitPrice int64  `json:"unit_price"`
		Currency  string `json:"currency"`
		Window    string `json:"payment_window"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.UnitPrice < 1 || in.Currency != "CNY" {
		writeErr(w, 422, "invalid_unit_price")
		return
	}
	window, err := time.ParseDuration(in.Window)
	if err != nil {
		writeErr(w, 422, "invalid_payment_window")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prices[r.PathValue("sku")] = fakePrice{unitPrice: in.UnitPrice, window: window}
	writeJSON(w, 200, in)
}

// placeOrder prices the order and sets its window from the SKU's terms, as the order service does.
func (f *fakeStockflow) placeOrder(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		writeErr(w, 400, "missing_idempotency_key")
		return
	}
	var in struct {
		Items []orderItem `json:"items"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Items) != 1 {
		writeErr(w, 422, "invalid_items")
		return
	}
	f.mu.Lock()
	price, ok := f.prices[in.Items[0].SKU]
	switch {
	case !ok:
		f.mu.Unlock()
		writeErr(w, 422, "sku_not_for_sale")
		return
	case in.Items[0].UnitPrice != 0 && in.Items[0].UnitPrice != price.unitPrice:
		f.mu.Unlock()
		writeErr(w, 409, "price_mismatch")
		return
	}
	pt := price.window
	if id, ok := f.keys[key]; ok {
		v := f.view(f.orders[id])
		f.mu.Unlock()
		writeJSON(w, 201, v)
		return
	}
	f.nextID++
	o := &fakeOrder{id: fmt.Sprintf("o%d", f.nextID), sku: in.Items[0].SKU, qty: in.Items[0].Qty, total: in.Items[0].Qty * price.unitPrice}
	o.set("pending")
	f.orders[o.id], f.keys[key] = o, o.id
	v := f.view(o)
	f.mu.Unlock()
	time.AfterFunc(5*time.Millisecond, func() { f.lock(o, pt) })
	writeJSON(w, 201, v)
}

func (f *fakeStockflow) lock(o *fakeOrder, pt time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.skus[o.sku]
	if s == nil || (s.Available < o.qty && !f.oversell) {
		o.set("rejected")
		return
	}
	f.move(o.sku, "lock", o.id, o.qty, figures{Locked: o.qty})
	o.expires = time.Now().Add(pt)
	f.locks[o.id] = o.expires
	o.set("awaiting_payment")
	time.AfterFunc(pt, func() { f.release(o, "release_timeout", "closed") })
}

func (f *fakeStockflow) release(o *fakeOrder, change, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, held := f.locks[o.id]; !held {
		return // another outcome won
	}
	delete(f.locks, o.id)
	f.move(o.sku, change, o.id, o.qty, figures{Locked: -o.qty})
	o.set(status)
}

func (f *fakeStockflow) view(o *fakeOrder) map[string]any {
	h := make([]map[string]string, len(o.history))
	for i, s := range o.history {
		h[i] = map[string]string{"status": s}
	}
	v := map[string]any{"order_id": o.id, "status": o.status, "total": o.total, "history": h}
	if !o.expires.IsZero() {
		v["expires_at"] = o.expires
	}
	return v
}

func (f *fakeStockflow) getOrder(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.orders[r.PathValue("id")]
	if !ok {
		writeErr(w, 404, "order_not_found")
		return
	}
	writeJSON(w, 200, f.view(o))
}

func (f *fakeStockflow) cancel(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	o, ok := f.orders[r.PathValue("id")]
	if !ok {
		f.mu.Unlock()
		writeErr(w, 404, "order_not_found")
		return
	}
	if o.status != "awaiting_payment" {
		f.mu.Unlock()
		writeErr(w, 409, "invalid_transition")
		return
	}
	f.mu.Unlock()
	time.AfterFunc(5*time.Millisecond, func() { f.release(o, "release_cancel", "cancelled") })
	writeJSON(w, 202, map[string]string{"order_id": o.id})
}

func (f *fakeStockflow) callback(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	if r.Header.Get("X-Sandbox-Signature") != Sign(raw, []byte(f.secret)) {
		writeErr(w, 401, "bad_signature")
		return
	}
	var in struct {
		OrderID string `json:"order_id"`
		Amount  int64  `json:"amount"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		writeErr(w, 400, "malformed_notification")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.orders[in.OrderID]
	if !ok || f.unknown > 0 {
		f.unknown--
		writeErr(w, 503, "order_unknown")
		return
	}
	if in.Amount != o.total {
		writeErr(w, 422, "amount_mismatch")
		return
	}
	time.AfterFunc(5*time.Millisecond, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case o.status == "paid":
		case f.locks[o.id] != (time.Time{}):
			delete(f.locks, o.id)
			f.move(o.sku, "sell", o.id, o.qty, figures{Locked: -o.qty, Sold: o.qty})
			o.set("paid")
		case f.skus[o.sku].Available >= o.qty: // late payment: re-lock and sell
			f.move(o.sku, "sell", o.id, o.qty, figures{Sold: o.qty})
			o.set("paid")
		default:
			o.set("refund_pending")
			o.set("refunded")
		}
	})
	writeJSON(w, 200, map[string]string{"status": "accepted"})
}

// metrics answers the part of stock's /metrics the sale reads, from the fake's own books: a
// lock row is a lock, a rejected order a rejection, each lock its own batch of one.
func (f *fakeStockflow) metrics(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	locked, rejected := 0, 0
	for _, rows := range f.ledger {
		for _, e := range rows {
			if e.ChangeType == "lock" {
				locked++
			}
		}
	}
	for _, o := range f.orders {
		if o.status == "rejected" {
			rejected++
		}
	}
	if f.miscount {
		locked *= 2
	}
	fmt.Fprintf(w, "# TYPE stockflow_stock_lock_outcomes_total counter\n")
	fmt.Fprintf(w, "stockflow_stock_lock_outcomes_total{outcome=\"locked\",reason=\"\"} %d\n", locked)
	fmt.Fprintf(w, "stockflow_stock_lock_outcomes_total{outcome=\"rejected\",reason=\"insufficient_stock\"} %d\n", rejected)
	fmt.Fprintf(w, "# TYPE stockflow_combine_batch_size histogram\n")
	fmt.Fprintf(w, "stockflow_combine_batch_size_bucket{batcher=\"lock\",le=\"+Inf\"} %d\n", locked+rejected)
	fmt.Fprintf(w, "stockflow_combine_batch_size_sum{batcher=\"lock\"} %d\n", locked+rejected)
	fmt.Fprintf(w, "stockflow_combine_batch_size_count{batcher=\"lock\"} %d\n", locked+rejected)
	fmt.Fprintf(w, "# TYPE stockflow_messaging_consumer_lag gauge\n")
	fmt.Fprintf(w, "stockflow_messaging_consumer_lag{stream=\"ORDER\",consumer=\"stock-order-created\"} 0\n")
}
