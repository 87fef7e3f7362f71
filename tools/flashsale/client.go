package flashsale

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/httpx"
)

// APIError is a non-2xx answer of a stockflow API, with the body's stable error code.
type APIError struct {
	Op     string
	Status int
	Code   string
	Body   string
}

func (e *APIError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%s: HTTP %d %s", e.Op, e.Status, e.Code)
	}
	return fmt.Sprintf("%s: HTTP %d %s", e.Op, e.Status, e.Body)
}

// transient reports whether err is worth retrying with the same request: a transport error,
// a 5xx, or 429. Order creation is safe to retry because the Idempotency-Key names it.
func transient(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
	}
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// Client speaks the public HTTP APIs of order, stock and payment-adapter. Nothing else: the
// simulator (and tools/loadtest) work against any deployment by URL.
type Client struct {
	http                       *http.Client
	orderURL, stockURL, payURL string
	secret                     []byte
	provider, paysimURL        string  // who buyers pay through ("" and sandbox: signed here)
	tokens                     *tokens // nil: requests carry no Authorization
}

// tokens mints the bearer tokens of the simulation: one per buyer (its own orders) and one
// for the staff work (the SKU, its ledger, the checks).
type tokens struct {
	signer *auth.Signer
	mu     sync.Mutex
	cache  map[string]string
}

const staff = "flashsale-ops"

func (t *tokens) get(subject string, roles ...auth.Role) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tok, ok := t.cache[subject]; ok {
		return tok, nil
	}
	buyer := ""
	if subject != staff {
		buyer = subject
	}
	tok, err := t.signer.Mint(subject, roles, buyer, 2*time.Hour)
	if err != nil {
		return "", err
	}
	t.cache[subject] = tok
	return tok, nil
}

// WithSigner makes c sign its requests with tokens of s (a deployment's identity provider, or
// the local one `make up` made): buyers' own tokens for their orders, a staff token
// (operator, viewer) for everything else.
func (c *Client) WithSigner(s *auth.Signer) *Client {
	if s != nil {
		c.tokens = &tokens{signer: s, cache: map[string]string{}}
	}
	return c
}

// as is the Authorization header of subject's requests ("" when c signs nothing).
func (c *Client) as(subject string) (map[string]string, error) {
	if c.tokens == nil {
		return map[string]string{}, nil
	}
	roles := []auth.Role{auth.Buyer}
	if subject == staff {
		roles = []auth.Role{auth.Operator, auth.Viewer}
	}
	tok, err := c.tokens.get(subject, roles...)
	if err != nil {
		return nil, err
	}
	return map[string]string{"Authorization": "Bearer " + tok}, nil
}

// NewClient returns a Client of the three APIs at these base URLs; secret signs sandbox
// payment callbacks.
func NewClient(hc *http.Client, orderURL, stockURL, paymentURL, secret string) *Client {
	return &Client{http: hc, orderURL: orderURL, stockURL: stockURL, payURL: paymentURL, secret: []byte(secret)}
}

func newClient(cfg Config) *Client {
	hc := cfg.HTTPClient
	if hc == nil {
		// Enough idle connections per host for every worker, so a busy run reuses connections
		// instead of leaving thousands in TIME_WAIT.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 4 * (cfg.Concurrency + 8)
		tr.MaxIdleConnsPerHost = cfg.Concurrency + 8
		hc = &http.Client{Transport: tr, Timeout: 15 * time.Second}
	}
	c := NewClient(hc, cfg.OrderURL, cfg.StockURL, cfg.PaymentURL, cfg.SandboxSecret).WithSigner(cfg.Signer)
	c.provider, c.paysimURL = cfg.Provider, strings.TrimSuffix(cfg.PaysimURL, "/")
	return c
}

// Do sends body (nil, raw []byte, or a value to marshal) to the absolute URL u and decodes a
// 2xx answer into out; any other answer is an *APIError. op names the call in errors.
func (c *Client) Do(ctx context.Context, op, method, u string, body any, headers map[string]string, out any) (int, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if _, own := headers["Authorization"]; !own && c.tokens != nil && !strings.Contains(u, "/v1/callbacks/") {
		h, err := c.as(staff)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
		req.Header.Set("Authorization", h["Authorization"])
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s: read body: %w", op, err)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, &APIError{Op: op, Status: resp.StatusCode, Body: string(bytes.TrimSpace(raw)), Code: httpx.ErrorCode(raw)}
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: decode %q: %w", op, truncate(raw, 200), err)
		}
	}
	return resp.StatusCode, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// SKUFigures are a SKU's quantities as GET /v1/skus/{sku} reports them.
type SKUFigures struct {
	SKU       string `json:"sku"`
	OnHand    int64  `json:"on_hand"`
	Available int64  `json:"available"`
	Locked    int64  `json:"locked"`
	Sold      int64  `json:"sold"`
	Incoming  int64  `json:"incoming"`
}

// CreateSKU creates sku with onHand units; an existing SKU is an *APIError with Status 409.
func (c *Client) CreateSKU(ctx context.Context, sku string, onHand int64) error {
	_, err := c.Do(ctx, "create sku "+sku, http.MethodPost, c.stockURL+"/v1/skus", map[string]any{"sku": sku, "on_hand": onHand}, nil, nil)
	return err
}

// SetPrice sets sku's sales terms on the order service: unitPrice minor units of currency and
// window, the payment window of its orders (0: the service's default).
func (c *Client) SetPrice(ctx context.Context, sku string, unitPrice int64, currency string, window time.Duration) error {
	body := map[string]any{"unit_price": unitPrice, "currency": currency}
	if window > 0 {
		body["payment_window"] = window.String()
	}
	_, err := c.Do(ctx, "set price of "+sku, http.MethodPut, c.orderURL+"/v1/prices/"+url.PathEscape(sku), body, nil, nil)
	return err
}

// SKU reads the SKU's quantities.
func (c *Client) SKU(ctx context.Context, sku string) (SKUFigures, error) {
	var f SKUFigures
	_, err := c.Do(ctx, "get sku "+sku, http.MethodGet, c.stockURL+"/v1/skus/"+url.PathEscape(sku), nil, nil, &f)
	return f, err
}

// ledgerEntry is one ledger row, with only the fields the report needs.
type ledgerEntry struct {
	ID         int64   `json:"id"`
	ChangeType string  `json:"change_type"`
	Qty        int64   `json:"qty"`
	OrderID    string  `json:"order_id"`
	Before     figures `json:"before"`
	After      figures `json:"after"`
}

type figures struct {
	OnHand    int64 `json:"on_hand"`
	Available int64 `json:"available"`
	Locked    int64 `json:"locked"`
	Sold      int64 `json:"sold"`
	Incoming  int64 `json:"incoming"`
}

// ledger pages through the SKU's whole ledger, oldest first.
func (c *Client) ledger(ctx context.Context, sku string) ([]ledgerEntry, error) {
	var all []ledgerEntry
	after := int64(0)
	for {
		var page struct {
			Entries   []ledgerEntry `json:"entries"`
			NextAfter int64         `json:"next_after"`
		}
		u := fmt.Sprintf("%s/v1/skus/%s/ledger?after=%d&limit=1000", c.stockURL, url.PathEscape(sku), after)
		if _, err := c.Do(ctx, "read ledger", http.MethodGet, u, nil, nil, &page); err != nil {
			return all, err
		}
		all = append(all, page.Entries...)
		if page.NextAfter == 0 || len(page.Entries) == 0 {
			return all, nil
		}
		after = page.NextAfter
	}
}

// VerifyReport is POST /v1/admin/verify: whether the ledger folds to every summary.
type VerifyReport struct {
	Consistent  bool             `json:"consistent"`
	Differences []map[string]any `json:"differences"`
}

// Verify asks the stock service to fold its ledger against the summaries.
func (c *Client) Verify(ctx context.Context) (VerifyReport, error) {
	var v VerifyReport
	_, err := c.Do(ctx, "verify", http.MethodPost, c.stockURL+"/v1/admin/verify", nil, nil, &v)
	return v, err
}

type overdue struct {
	Count  int      `json:"count"`
	Orders []string `json:"orders"`
}

func (c *Client) overdueLocks(ctx context.Context, grace time.Duration) (overdue, error) {
	var o overdue
	_, err := c.Do(ctx, "overdue locks", http.MethodGet, c.stockURL+"/v1/admin/overdue-locks?grace="+grace.String(), nil, nil, &o)
	return o, err
}

// orderItem is one line of an order; UnitPrice, when set, quotes the price the buyer saw (the
// order service refuses the order when it is not the SKU's).
type orderItem struct {
	SKU       string `json:"sku"`
	Qty       int64  `json:"qty"`
	UnitPrice int64  `json:"unit_price,omitempty"`
}

// OrderView is GET /v1/orders/{id}, with only the fields the simulator and the load test read.
type OrderView struct {
	OrderID   string    `json:"order_id"`
	Status    string    `json:"status"`
	Total     int64     `json:"total"`
	ExpiresAt time.Time `json:"expires_at"`
	History   []struct {
		Status string    `json:"status"`
		At     time.Time `json:"at"`
	} `json:"history"`
}

// placeOrder places buyer's order of items in CNY; its payment window is the SKUs'.
func (c *Client) placeOrder(ctx context.Context, key, buyer string, items []orderItem) (OrderView, error) {
	var o OrderView
	body := map[string]any{"buyer_id": buyer, "items": items, "currency": "CNY"}
	headers, err := c.as(buyer)
	if err != nil {
		return o, err
	}
	headers["Idempotency-Key"] = key
	_, err = c.Do(ctx, "place order", http.MethodPost, c.orderURL+"/v1/orders", body, headers, &o)
	return o, err
}

// Order reads an order with its history.
func (c *Client) Order(ctx context.Context, id string) (OrderView, error) {
	var o OrderView
	_, err := c.Do(ctx, "get order "+id, http.MethodGet, c.orderURL+"/v1/orders/"+url.PathEscape(id), nil, nil, &o)
	return o, err
}

func (c *Client) cancel(ctx context.Context, id string) error {
	_, err := c.Do(ctx, "cancel order "+id, http.MethodPost, c.orderURL+"/v1/orders/"+url.PathEscape(id)+"/cancel", nil, nil, nil)
	return err
}

// pay posts a signed sandbox provider callback for the order, as a payment provider would.
func (c *Client) pay(ctx context.Context, orderID, txn string, amount int64) error {
	raw, err := json.Marshal(map[string]any{"provider_txn_id": txn, "order_id": orderID, "amount": amount, "currency": "CNY", "status": "succeeded"})
	if err != nil {
		return err
	}
	_, err = c.Do(ctx, "pay order "+orderID, http.MethodPost, c.payURL+"/v1/callbacks/sandbox", raw,
		map[string]string{"X-Sandbox-Signature": Sign(raw, c.secret)}, nil)
	return err
}

// providerCallback is a callback as paysim made it, signed by its provider.
type providerCallback struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// payment returns a buyer's payment of the order, to call until it succeeds: the sandbox
// callback, or — for stripe, wechatpay and alipay — the payment taken at paysim once and its
// provider-signed callback delivered to the adapter at each call, so a retry is the
// provider's retry of one payment, never a second payment.
func (c *Client) payment(orderID, txn string, amount int64) func(context.Context) error {
	if c.provider == "" || c.provider == "sandbox" {
		return func(ctx context.Context) error { return c.pay(ctx, orderID, txn, amount) }
	}
	var cb *providerCallback
	return func(ctx context.Context) error {
		if cb == nil {
			var res struct {
				Callback *providerCallback `json:"callback"`
			}
			if _, err := c.Do(ctx, c.provider+" payment of order "+orderID, http.MethodPost, c.paysimURL+"/"+c.provider+"/payments",
				map[string]any{"order_id": orderID, "amount": amount, "currency": "CNY", "deliver": false}, nil, &res); err != nil {
				return err
			}
			if res.Callback == nil {
				return fmt.Errorf("%s payment of order %s: paysim made no callback", c.provider, orderID)
			}
			cb = res.Callback
		}
		_, err := c.Do(ctx, "pay order "+orderID+" ("+c.provider+")", http.MethodPost, cb.URL, []byte(cb.Body), cb.Headers, nil)
		return err
	}
}

// Sign is the sandbox provider's signature of a callback body: hex(HMAC-SHA256(body, secret)).
func Sign(body, secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
