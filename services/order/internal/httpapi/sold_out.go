package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/order/internal/app"
)

// soldOutMaxBody is the largest POST /v1/orders body soldOutFirst reads before the token is
// checked; a larger one (an order of many lines) goes the normal way.
const soldOutMaxBody = 8 << 10

// soldOutFirst answers a POST /v1/orders 409 sold_out at once when its lines name a SKU the
// gate answered sold_out for moments ago (app.Service.KnownSoldOut); anything else goes on to
// next with its body unread.
//
// It runs before the token check on purpose. In a flash sale's storm nearly every request is
// a loser, and verifying its token, quoting its price and asking Redis is what saturated the
// order process (docs/performance.md, "Sold-out storm"). A loser needs none of it: the answer
// changes and stores nothing, and tells no more than the public GET /v1/availability tells
// anyone (docs/security.md). It reads only the SKUs and quantities; a body it cannot parse,
// or one larger than soldOutMaxBody, gets the normal path and its 4xx.
func soldOutFirst(svc *app.Service, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !svc.MaybeSoldOut() {
			next.ServeHTTP(w, r)
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, soldOutMaxBody+1))
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(raw), r.Body), r.Body}
		var body struct {
			Items []app.ItemRequest `json:"items"`
		}
		if err == nil && len(raw) <= soldOutMaxBody && json.Unmarshal(raw, &body) == nil {
			if err := svc.KnownSoldOut(r.Context(), body.Items); err != nil {
				httpx.WriteError(w, errs.Error(err))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
