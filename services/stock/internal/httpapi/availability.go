package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// The storefront read: GET /v1/availability?sku=A&sku=B (or ?sku=A,B), public, answered from
// app.Availability's snapshot, never from the database.

// MaxAvailabilitySKUs is how many SKUs one availability request may name, repeats included.
const MaxAvailabilitySKUs = 100

// Option adds an optional part to the API Handler serves.
type Option func(*parts)

// parts are the optional parts of the API.
type parts struct {
	availability *app.Availability
	gates        *app.Gates
}

// WithAvailability serves GET /v1/availability from a. Without it the route answers
// 503 availability_not_ready.
func WithAvailability(a *app.Availability) Option {
	return func(p *parts) { p.availability = a }
}

// availabilityServer is the route of GET /v1/availability on the read model with names.
func availabilityServer(t httpx.Transport, p parts) http.Handler {
	return httpx.Server(t, decodeAvailability, func(ctx context.Context, skus []string) (availabilityResponse, error) {
		if p.availability == nil {
			return availabilityResponse{}, app.ErrAvailabilityNotReady
		}
		ans, err := p.availability.Get(ctx, skus)
		if err != nil {
			return availabilityResponse{}, err
		}
		return viewAvailability(ans), nil
	})
}

// decodeAvailability returns the SKUs asked for, each once, in the order first named.
func decodeAvailability(_ context.Context, r *http.Request) ([]string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, codeInvalidQuery.Errorf("the query string is malformed")
	}
	var skus []string
	seen := map[string]bool{}
	n := 0
	for _, v := range q["sku"] {
		for sku := range strings.SplitSeq(v, ",") {
			if n++; n > MaxAvailabilitySKUs {
				return nil, codeTooManySKUs.Errorf("at most %d skus per request", MaxAvailabilitySKUs)
			}
			if err := stock.ValidSKU(sku); err != nil {
				return nil, codeInvalidSKUQuery.Errorf("%v", err)
			}
			if !seen[sku] {
				seen[sku] = true
				skus = append(skus, sku)
			}
		}
	}
	if n == 0 {
		return nil, codeMissingSKU.Errorf("name at least one sku: ?sku=A&sku=B or ?sku=A,B")
	}
	return skus, nil
}

type skuAvailabilityView struct {
	SKU       string `json:"sku"`
	Available int64  `json:"available"`
	Status    string `json:"status"`
}

type availabilityResponse struct {
	AsOf          time.Time             `json:"as_of"`
	MaxAgeSeconds int64                 `json:"max_age_seconds"`
	SKUs          []skuAvailabilityView `json:"skus"`
	Unknown       []string              `json:"unknown"`
}

// Headers let a CDN or the gateway keep the answer for as long as its snapshot is within the
// TTL: whole seconds, rounded down, so none is kept past the next refresh.
func (v availabilityResponse) Headers() http.Header {
	return http.Header{"Cache-Control": {"public, max-age=" + strconv.FormatInt(v.MaxAgeSeconds, 10)}}
}

func viewAvailability(a app.AvailabilityAnswer) availabilityResponse {
	v := availabilityResponse{AsOf: a.AsOf, MaxAgeSeconds: int64(a.MaxAge / time.Second),
		SKUs: make([]skuAvailabilityView, len(a.SKUs)), Unknown: a.Unknown}
	for i, s := range a.SKUs {
		v.SKUs[i] = skuAvailabilityView{SKU: s.SKU, Available: s.Available, Status: string(s.Status)}
	}
	return v
}
