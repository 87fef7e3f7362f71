package app

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/stockflow/stockflow/services/order/internal/catalog"
)

// SetPrice sets the sales terms of sku as operator updatedBy: unitPrice minor units of
// currency and the SKU's own payment window (0: the default). The next order of sku on this
// replica is priced by them; on other replicas within Policy.PriceCacheTTL. It returns a
// wrapped catalog validation error (catalog.ErrInvalidPrice…) when the terms are not
// acceptable, nothing stored then.
func (s *Service) SetPrice(ctx context.Context, sku string, unitPrice int64, currency string, window time.Duration, updatedBy string) (catalog.Price, error) {
	p, err := catalog.New(sku, unitPrice, currency, window, s.policy.MinPaymentWindow, s.now(), updatedBy)
	if err != nil {
		return catalog.Price{}, err
	}
	if err := s.prices.put(ctx, p); err != nil {
		return catalog.Price{}, err
	}
	s.log.InfoContext(ctx, "price set", "sku", sku, "unit_price", unitPrice, "currency", currency,
		"payment_window", window, "updated_by", updatedBy)
	return p, nil
}

// Price returns the stored terms of sku (never a cached copy), or catalog.ErrNotFound.
func (s *Service) Price(ctx context.Context, sku string) (catalog.Price, error) {
	got, err := s.prices.list.Prices(ctx, []string{sku})
	if err != nil {
		return catalog.Price{}, fmt.Errorf("get price of %s: %w", sku, err)
	}
	p, ok := got[sku]
	if !ok {
		return catalog.Price{}, fmt.Errorf("%w: %s", catalog.ErrNotFound, sku)
	}
	return p, nil
}

// maxCachedPrices bounds the price cache; past it the cache starts over.
const maxCachedPrices = 10_000

// priceCache keeps the prices placement read, for ttl: a flash sale's orders all price the
// same SKU, and reading it for each would add a statement to every POST. Only prices found
// are kept — a SKU put on sale is for sale at once on every replica — and put forgets the
// SKU's entry, so this replica sees its own changes at once.
type priceCache struct {
	list PriceList
	ttl  time.Duration
	now  func() time.Time

	mu      sync.RWMutex
	entries map[string]cachedPrice
	gen     uint64 // bumped by every put: a read that raced with one is not kept
}

type cachedPrice struct {
	price catalog.Price
	until time.Time
}

func newPriceCache(list PriceList, ttl time.Duration, now func() time.Time) *priceCache {
	return &priceCache{list: list, ttl: ttl, now: now, entries: map[string]cachedPrice{}}
}

// get returns the terms of those of skus that have a price, keyed by SKU, reading only the
// ones not cached, in one statement.
func (c *priceCache) get(ctx context.Context, skus []string) (map[string]catalog.Price, error) {
	out := make(map[string]catalog.Price, len(skus))
	var missing []string
	now := c.now()
	c.mu.RLock()
	gen := c.gen
	for _, sku := range skus {
		if e, ok := c.entries[sku]; ok && now.Before(e.until) {
			out[sku] = e.price
		} else {
			missing = append(missing, sku)
		}
	}
	c.mu.RUnlock()
	if len(missing) == 0 {
		return out, nil
	}
	read, err := c.list.Prices(ctx, missing)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, read)
	if c.ttl <= 0 || len(read) == 0 {
		return out, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return out, nil // a price was set meanwhile: what we read may be older than it
	}
	if len(c.entries)+len(read) > maxCachedPrices {
		clear(c.entries)
	}
	for sku, p := range read {
		c.entries[sku] = cachedPrice{price: p, until: now.Add(c.ttl)}
	}
	return out, nil
}

// put stores p and forgets the SKU's cached terms.
func (c *priceCache) put(ctx context.Context, p catalog.Price) error {
	err := c.list.PutPrice(ctx, p)
	c.mu.Lock()
	c.gen++
	delete(c.entries, p.SKU())
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("set price of %s: %w", p.SKU(), err)
	}
	return nil
}
