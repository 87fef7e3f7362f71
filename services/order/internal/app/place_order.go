package app

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// MaxIdempotencyKeyLen bounds the Idempotency-Key header.
const MaxIdempotencyKeyLen = 255

// Errors of the idempotency key.
var (
	ErrMissingIdempotencyKey = errors.New("idempotency key required")
	ErrInvalidIdempotencyKey = errors.New("invalid idempotency key")
)

// PlaceOrderRequest is a buyer's order as the API received it.
type PlaceOrderRequest struct {
	// IdempotencyKey names the request: a retry with the same key and request gets the
	// same order. Keys are global, not per buyer: clients should use random UUIDs.
	IdempotencyKey string
	BuyerID        string
	Items          []ItemRequest
	Currency       string
	// PaymentTimeout is the payment window; zero means the service default.
	PaymentTimeout time.Duration
}

// ItemRequest is one requested line.
type ItemRequest struct {
	SKU       string `json:"sku"`
	Qty       int64  `json:"qty"`
	UnitPrice int64  `json:"unit_price"`
}

// PlaceOrder validates req and stores a pending order with its history and an order.created
// event (payment_deadline = now + timeout), in one transaction. It returns created=false with
// the earlier order when the key was used before for the same request, ErrIdempotencyConflict
// when it was used for another, and a wrapped order validation error (order.ErrInvalidSKU…),
// ErrMissingIdempotencyKey or ErrInvalidIdempotencyKey when req is not acceptable; nothing is
// stored on any error.
func (s *Service) PlaceOrder(ctx context.Context, req PlaceOrderRequest) (o *order.Order, created bool, err error) {
	if err := checkKey(req.IdempotencyKey); err != nil {
		return nil, false, err
	}
	items := make([]order.Item, len(req.Items))
	for i, it := range req.Items {
		if items[i], err = order.NewItem(it.SKU, it.Qty, it.UnitPrice); err != nil {
			return nil, false, fmt.Errorf("items[%d]: %w", i, err)
		}
	}
	timeout := req.PaymentTimeout
	if timeout == 0 {
		timeout = s.paymentTimeout
	}
	o, err = order.New(s.newID(), req.BuyerID, items, req.Currency, timeout, s.now())
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
	stored, created, err := s.repo.Create(ctx, o, req.IdempotencyKey, hash, msgs)
	if err != nil {
		return nil, false, fmt.Errorf("place order: %w", err)
	}
	if created {
		s.log.InfoContext(ctx, "order placed", "order_id", stored.ID(), "total", stored.Total(), "lines", len(items))
	}
	return stored, created, nil
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
