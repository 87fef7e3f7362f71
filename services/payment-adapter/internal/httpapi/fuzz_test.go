package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
)

// FuzzDecoders feeds arbitrary bodies, path values, queries and signatures to every request
// decoder of the payment API, and a decoded callback on to the provider's verification (what
// HandleCallback does before it touches the database). Properties: no panic, and every error
// is a 4xx (bad input is never a 500).
func FuzzDecoders(f *testing.F) {
	good := `{"provider_txn_id":"txn-1","order_id":"ord-1","amount":9800,"currency":"CNY","status":"succeeded"}`
	seeds := []struct{ body, path, query, sig string }{
		{good, "sandbox", "order_id=ord-1", ""},
		{good, "sandbox", "", "zz-not-hex"},
		{good, "stripe", "", ""},
		{strings.Replace(good, `"succeeded"`, `"refunded"`, 1), "sandbox", "", ""},
		{`{"provider_txn_id":"txn-1"}`, "pay-1", "order_id=", ""},
		{`{"amount":99999999999999999999}`, strings.Repeat("p", 65), "order_id=" + strings.Repeat("o", 129), ""},
		{`{"order_id":"a\u0000b"}`, "a\x00b", "order_id=a%00b", "a\x00b"},
		{"{\"order_id\":\"\xff\"}", "\xff", "order_id=%ff", ""},
		{`{"order_id":` + strings.Repeat(`[`, 10001), "sandbox", "", ""},
		{``, "", "", ""},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.path, s.query, s.sig, s.sig == "")
	}
	p, err := sandbox.New("fuzz-secret")
	if err != nil {
		f.Fatal(err)
	}
	providers, err := payment.NewRegistry(p)
	if err != nil {
		f.Fatal(err)
	}
	decoders := map[string]kithttp.DecodeRequestFunc{"callback": httpx.Decoder(decodeCallback), "paymentID": httpx.Decoder(decodePaymentID), "list": httpx.Decoder(decodeList)}
	f.Fuzz(func(t *testing.T, body []byte, path, query, sig string, sign bool) {
		if sign {
			sig = p.Sign(body)
		}
		ctx := context.Background()
		for name, decode := range decoders {
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://payment.test/", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			r.URL.RawQuery = query
			r.Header.Set(sandbox.SignatureHeader, sig)
			r.SetPathValue("provider", path)
			r.SetPathValue("id", path)
			req, err := decode(ctx, r)
			if err == nil && name == "callback" {
				cb := req.(callbackRequest)
				var prov payment.Provider
				if prov, err = providers.Provider(cb.provider); err == nil {
					_, err = prov.Verify(cb.header, cb.body)
				}
			}
			if err != nil {
				if s := errs.Error(err).Status; s < 400 || s > 499 {
					t.Fatalf("%s: bad input answered %d: %v", name, s, err)
				}
			}
		}
	})
}
