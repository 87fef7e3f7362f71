package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/httpx"
)

// FuzzDecoders feeds arbitrary bodies, order ids, queries and Idempotency-Keys to every
// request decoder of the order API, as a buyer and as staff. Properties: no decoder panics,
// and every error is a 4xx (bad input is never a 500).
func FuzzDecoders(f *testing.F) {
	decoders := map[string]kithttp.DecodeRequestFunc{
		"placeOrder": httpx.Decoder(decodePlaceOrder), "orderID": httpx.Decoder(decodeOrderID),
		"listOrders": httpx.Decoder(decodeListOrders), "orderAction": httpx.Decoder(decodeOrderAction),
	}
	seeds := []struct {
		body, id, query, key string
		buyer                bool
	}{
		{`{"buyer_id": "u1", "items": [{"sku": "CUP-1", "qty": 2, "unit_price": 4900}, {"sku": "MUG-2", "qty": 1, "unit_price": 100}], "currency": "CNY", "payment_timeout": "10m"}`, "", "", "k1", true},
		{`{"items": [{"sku": "CUP-1", "qty": 2}], "currency": "CNY"}`, "", "", "k1", true},
		{`{"buyer_id": "u2", "items": [], "currency": "CNY"}`, "", "buyer_id=u2", "k2", true},
		{`{"reason": "changed my mind"}`, "0195a1b2-0000-7000-8000-000000000001", "buyer_id=u1&limit=3", "", false},
		{`{"why": "x"}`, "nope", "buyer_id=u1&limit=3&before=x", "", false},
		{`{"reason":`, "x", "limit=0", "", false},
		{`{"reason": "a\u0000b"}`, "a\x00b", "buyer_id=a%00b", "a\x00b", true},
		{`{"items": [{"sku": "CUP-1", "qty": 99999999999999999999}], "payment_timeout": "99999999999h"}`, strings.Repeat("9", 65), "limit=99999999999999999999", "", true},
		{`{"items": [{"sku": "CUP-1", "qty": 1e400, "unit_price": -1}], "payment_timeout": "-1s"}`, "", "limit=-1", "", false},
		{`{"items": "CUP-1", "currency": 5, "payment_timeout": null}`, "", "", "", true},
		{"{\"reason\": \"\xff\"}", "\xff", "buyer_id=%ff", "", false},
		{`{"items": ` + strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001) + `}`, "", "", "", true},
		{`null`, "", "", "", false},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.id, s.query, s.key, s.buyer)
	}
	buyer := &auth.Claims{Roles: []auth.Role{auth.Buyer}, BuyerID: "u1"}
	buyer.Subject = "u1"
	staff := &auth.Claims{Roles: []auth.Role{auth.Operator, auth.Viewer, auth.Admin}}
	staff.Subject = "ops"
	f.Fuzz(func(t *testing.T, body []byte, id, query, key string, asBuyer bool) {
		ctx := auth.WithClaims(context.Background(), staff)
		if asBuyer {
			ctx = auth.WithClaims(context.Background(), buyer)
		}
		for name, decode := range decoders {
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://order.test/", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			r.URL.RawQuery = query
			r.Header.Set("Idempotency-Key", key)
			r.SetPathValue("id", id)
			if _, err := decode(ctx, r); err != nil {
				if s := errs.Error(err).Status; s < 400 || s > 499 {
					t.Fatalf("%s: bad input answered %d: %v", name, s, err)
				}
			}
		}
	})
}
