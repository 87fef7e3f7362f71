package app

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/catalog"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// MaxIdempotencyKeyLen bounds the Idempotency-Key header.
const MaxIdempotencyKeyLen = 255

// Errors of the idempotency key.
var (
	ErrMissingIdempotencyKey = errors.New("idempotency key required")
	ErrInvalidIdempotencyKey = errors.New("invalid idempotency key")
)

// Errors of an order the price list does not allow; nothing is stored for any of them.
var (
	// ErrNotForSale: a line's SKU has no price.
	ErrNotForSale = errors.New("sku not for sale")
	// ErrPriceMismatch: the request quotes a unit price that is not the SKU's.
	ErrPriceMismatch = errors.New("price mismatch")
	// ErrCurrencyMismatch: the lines' SKUs are priced in different currencies, or not in the
	// request's.
	ErrCurrencyMismatch = errors.New("currency mismatch")
	// ErrPaymentTimeoutTooLong: the request asks for more time to pay than the order's
	// payment window; a request may only shorten it.
	ErrPaymentTimeoutTooLong = errors.New("payment_timeout too long")
)

// PlaceOrderRequest is a buyer's order as the API received it.
type PlaceOrderRequest struct {
	// IdempotencyKey names the request: a retry with the same key and request gets the
	// same order. Keys are global, not per buyer: clients should use random UUIDs.
	IdempotencyKey string
	BuyerID        string
	Items          []ItemRequest
	// Currency, when set, must be the currency the SKUs are priced in.
	Currency string
	// PaymentTimeout, when set, shortens the order's payment window; zero: the window.
	PaymentTimeout time.Duration
}

// ItemRequest is one requested line.
type ItemRequest struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
	// UnitPrice is the price the buyer saw, when the client quotes it: it must be the price
	// list's. nil: not quoted.
	UnitPrice *int64 `json:"unit_price,omitempty"`
}

// PlaceOrder validates req, prices its lines from the price list and stores a pending order
// with its history and an order.created event (payment_deadline = now + the order's window),
// in one transaction. The window is the shortest of the lines' (a SKU's own, else
// Policy.PaymentWindow), or the request's PaymentTimeout when that is shorter still.
//
// It returns created=false with the earlier order when the key was used before for the same
// request, and ErrIdempotencyConflict when it was used for another. A request that is not
// acceptable returns ErrMissingIdempotencyKey, ErrInvalidIdempotencyKey, a wrapped order
// validation error (order.ErrInvalidSKU…, order.ErrInvalidTimeout for a timeout under
// Policy.MinPaymentWindow), a *RateLimitError (ErrRateLimited), ErrNotForSale,
// ErrPriceMismatch, ErrCurrencyMismatch, ErrPaymentTimeoutTooLong or — when the flash-sale
// gate has too little left of an armed SKU — ErrSoldOut. Nothing is stored on any error.
func (s *Service) PlaceOrder(ctx context.Context, req PlaceOrderRequest) (o *order.Order, created bool, err error) {
	if err := checkKey(req.IdempotencyKey); err != nil {
		return nil, false, err
	}
	if err := s.checkRequest(req); err != nil {
		return nil, false, err
	}
	skus := make([]string, len(req.Items))
	for i, it := range req.Items {
		skus[i] = it.SKU
	}
	// After the checks, so every key is a valid buyer or SKU; before the price list, so a
	// buyer over the limit costs no read.
	if err := s.admit(req.BuyerID, skus); err != nil {
		return nil, false, err
	}
	items, currency, window, err := s.quote(ctx, req, skus)
	if err != nil {
		return nil, false, err
	}
	o, err = order.New(s.newID(), req.BuyerID, items, currency, window, s.now())
	if err != nil {
		return nil, false, err
	}
	hash, err := requestHash(req)
	if err != nil {
		return nil, false, err
	}
	msgs, err := s.encode(orderCreated(o))
	if err != nil {
		return nil, false, fmt.Errorf("place order: %w", err)
	}
	// Last before the store, so a request refused for any other reason takes nothing.
	gated, err := s.admitThroughGate(ctx, o)
	if err != nil {
		return nil, false, err
	}
	stored, created, err := s.repo.Create(ctx, o, req.IdempotencyKey, hash, msgs)
	if gated && (err != nil || !created) {
		s.giveBackUnstored(ctx, o.ID())
	}
	if err != nil {
		return nil, false, fmt.Errorf("place order: %w", err)
	}
	if created {
		s.rec.enter(ctx, stored.Status())
		s.log.InfoContext(ctx, "order placed", "order_id", stored.ID(), "total", stored.Total(), "lines", len(items))
	}
	return stored, created, nil
}

// checkRequest refuses what order.New would refuse of req before anything reads or limits:
// the buyer, the lines' shape (a SKU on two lines too), a negative quoted price, the
// currency's syntax, a timeout outside MinPaymentWindow..order.MaxPaymentTimeout.
func (s *Service) checkRequest(req PlaceOrderRequest) error {
	if err := order.CheckBuyer(req.BuyerID); err != nil {
		return err
	}
	if n := len(req.Items); n < 1 || n > order.MaxItems {
		return fmt.Errorf("%w: an order has 1 to %d lines, got %d", order.ErrInvalidItems, order.MaxItems, n)
	}
	seen := make(map[string]bool, len(req.Items))
	for i, it := range req.Items {
		if _, err := order.NewItem(it.SKU, it.Qty, 0); err != nil {
			return fmt.Errorf("items[%d]: %w", i, err)
		}
		if seen[it.SKU] {
			return fmt.Errorf("items[%d]: %w: %s appears on more than one line", i, order.ErrDuplicateSKU, it.SKU)
		}
		seen[it.SKU] = true
		if it.UnitPrice != nil {
			if _, err := order.NewPrice(*it.UnitPrice); err != nil {
				return fmt.Errorf("items[%d]: sku %s: %w", i, it.SKU, err)
			}
		}
	}
	if req.Currency != "" && !catalog.ValidCurrency(req.Currency) {
		return fmt.Errorf("%w: %q is not three upper-case letters (ISO 4217)", order.ErrInvalidCurrency, req.Currency)
	}
	switch t := req.PaymentTimeout; {
	case t == 0:
	case t < s.policy.MinPaymentWindow:
		return fmt.Errorf("%w: %s is shorter than the shortest payment window, %s", order.ErrInvalidTimeout, t, s.policy.MinPaymentWindow)
	case t > order.MaxPaymentTimeout:
		return fmt.Errorf("%w: %s is longer than %s", ErrPaymentTimeoutTooLong, t, order.MaxPaymentTimeout)
	}
	return nil
}

// quote prices req's lines (of skus) from the price list and returns them with their
// currency and the order's payment window.
func (s *Service) quote(ctx context.Context, req PlaceOrderRequest, skus []string) ([]order.Item, string, time.Duration, error) {
	prices, err := s.prices.get(ctx, skus)
	if err != nil {
		return nil, "", 0, fmt.Errorf("place order: %w", err)
	}
	items := make([]order.Item, len(req.Items))
	currency, currencyOf := req.Currency, "the request"
	var window time.Duration
	for i, it := range req.Items {
		p, ok := prices[it.SKU]
		if !ok {
			return nil, "", 0, fmt.Errorf("items[%d]: %w: %s has no price", i, ErrNotForSale, it.SKU)
		}
		price := p.UnitPrice().Int64()
		if it.UnitPrice != nil && *it.UnitPrice != price {
			return nil, "", 0, fmt.Errorf("items[%d]: %w: sku %s costs %d %s, the request says %d",
				i, ErrPriceMismatch, it.SKU, price, p.Currency(), *it.UnitPrice)
		}
		switch {
		case currency == "":
			currency, currencyOf = p.Currency(), "sku "+it.SKU
		case p.Currency() != currency:
			return nil, "", 0, fmt.Errorf("items[%d]: %w: sku %s is priced in %s, %s in %s",
				i, ErrCurrencyMismatch, it.SKU, p.Currency(), currencyOf, currency)
		}
		w := cmp.Or(p.PaymentWindow(), s.policy.PaymentWindow)
		if window == 0 || w < window {
			window = w
		}
		if items[i], err = order.NewItem(it.SKU, it.Qty, price); err != nil {
			return nil, "", 0, fmt.Errorf("items[%d]: %w", i, err)
		}
	}
	if t := req.PaymentTimeout; t != 0 {
		if t > window {
			return nil, "", 0, fmt.Errorf("%w: %s is longer than this order's payment window, %s", ErrPaymentTimeoutTooLong, t, window)
		}
		window = t
	}
	return items, currency, window, nil
}

func checkKey(key string) error {
	if key == "" {
		return ErrMissingIdempotencyKey
	}
	if len(key) > MaxIdempotencyKeyLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidIdempotencyKey, MaxIdempotencyKeyLen)
	}
	for _, r := range key {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: printable ASCII only", ErrInvalidIdempotencyKey)
		}
	}
	return nil
}

// requestHash fingerprints the parsed request, not its bytes: the same order sent with other
// whitespace, field order or "30m" for "1800s" is the same request.
func requestHash(req PlaceOrderRequest) ([]byte, error) {
	b, err := json.Marshal(struct {
		BuyerID   string        `json:"b"`
		Items     []ItemRequest `json:"i"`
		Currency  string        `json:"c"`
		TimeoutNS int64         `json:"t"`
	}{req.BuyerID, req.Items, req.Currency, int64(req.PaymentTimeout)})
	if err != nil {
		return nil, fmt.Errorf("hash request: %w", err)
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

func orderCreated(o *order.Order) events.OrderCreated {
	items := o.Items()
	ev := events.OrderCreated{
		OrderID:         o.ID(),
		BuyerID:         o.BuyerID(),
		Items:           make([]events.OrderItem, len(items)),
		Total:           o.Total().Int64(),
		Currency:        o.Currency(),
		PaymentDeadline: o.ExpiresAt(),
	}
	for i, it := range items {
		ev.Items[i] = events.OrderItem{SKU: it.SKU(), Qty: it.Qty().Int64(), UnitPrice: it.UnitPrice().Int64()}
	}
	return ev
}
