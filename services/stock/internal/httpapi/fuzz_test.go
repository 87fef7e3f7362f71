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

// FuzzDecoders feeds arbitrary bodies, path values, queries and Idempotency-Keys to every
// request decoder of the stock API. Properties: no decoder panics, and every error is a 4xx
// (bad input is never a 500).
func FuzzDecoders(f *testing.F) {
	decoders := map[string]kithttp.DecodeRequestFunc{
		"createSKU": httpx.Decoder(decodeCreateSKU), "skuPath": httpx.Decoder(decodeSKUPath), "slots": httpx.Decoder(decodeSlots),
		"rebalance": httpx.Decoder(decodeRebalance), "ledger": httpx.Decoder(decodeLedger), "move": httpx.Decoder(decodeMove),
		"adjustment": httpx.Decoder(decodeAdjustment), "adjustmentID": httpx.Decoder(decodeAdjustmentID), "lock": httpx.Decoder(decodeLock),
		"orderPath": httpx.Decoder(decodeOrderPath), "release": httpx.Decoder(decodeRelease), "sell": httpx.Decoder(decodeSell),
		"overdue": httpx.Decoder(decodeOverdue), "availability": httpx.Decoder(decodeAvailability),
		"listSKUs": httpx.Decoder(decodeListSKUs), "listAdjustments": httpx.Decoder(decodeListAdjustments),
		"placePO": httpx.Decoder(decodePlacePurchaseOrder), "receivePO": httpx.Decoder(decodeReceivePurchaseOrder),
		"poID": httpx.Decoder(decodePurchaseOrderID), "closePO": httpx.Decoder(decodeClosePurchaseOrder),
		"listPOs": httpx.Decoder(decodeListPurchaseOrders),
	}
	// The bodies, paths and queries the tests send, then hostile ones.
	seeds := []struct{ body, path, query, key string }{
		{`{"sku":"CUP-1","on_hand":300}`, "CUP-1", "", "k1"},
		{`{"sku":"X","on_hand":1,"stock":5}`, "CUP-1", "", ""},
		{`{"sku":"X","on_hand":1} {}`, "CUP-1", "", ""},
		{`{"qty":50,"remark":"PO-1"}`, "CUP-1", "", "po-1"},
		{`{"slots":4}`, "CUP-1", "", ""},
		{`{"kind":"stocktake","counted":340,"reason":"count"}`, "CUP-1", "", ""},
		{`{"kind":"manual_adjust","delta":-1,"reason":"x"}`, "CUP-1", "", ""},
		{`{"order_id":"o1","items":[{"sku":"CUP-1","qty":2}],"payment_timeout":"10m"}`, "o1", "", ""},
		{`{"reason":"timeout"}`, "o-held", "", ""},
		{`{"payment_id":"pay-1"}`, "o1", "", ""},
		{``, "1", "after=5&limit=3", ""},
		{``, "NOPE", "after=x", ""},
		{``, "CUP-1", "limit=0", ""},
		{``, "CUP-1", "grace=30s", ""},
		{``, "", "sku=CUP-1,MUG-1&sku=NOPE-1&sku=CUP-1", ""},
		{``, "", "sku=" + strings.Repeat("S,", 100) + "S", ""},
		{``, "", "sku=,&sku=%zz;x&sku=a%00b", ""},
		{`{"sku":"X","on_hand":99999999999999999999}`, "999", "after=99999999999999999999", ""},
		{`{"qty":1e400}`, "99999999999999999999", "limit=1e400&grace=-1s", ""},
		{`{"order_id":"a\u0000b","items":[{"sku":"CUP-1","qty":1}]}`, "a\x00b", "grace=1\x00s", "a\x00b"},
		{`{"kind":"manual_adjust","delta":1,"reason":"a\u0000b"}`, "CUP-1", "", ""},
		{"{\"remark\":\"\xff\"}", "\xff", "after=%ff", strings.Repeat("k", 201)},
		{`{"items":` + strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001) + `}`, strings.Repeat("S", 65), "", ""},
		{`{"items":"CUP-1","slots":"4","counted":true,"delta":[1]}`, "-1", "limit=-1", ""},
		{`{"quantity":100,"remark":"supplier A"}`, "CUP-1", "prefix=CUP-&after=CUP-2&limit=2", "po-1"},
		{`{"quantity":30}`, "7", "status=pending&sku=CUP-1&before=9", "r1"},
		{``, "CUP-1", "type=lock,sell&type=&order_id=o1&operator=alice&since=2026-01-02T00:00:00Z&until=2026-01-03T00:00:00Z", ""},
		{``, "CUP-1", "type=teleport&since=yesterday&until=2026-01-01T00:00:00Z&prefix=a%20b&status=done&before=-1", ""},
		{`null`, "", "", ""},
		{`[]`, "0", "", ""},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.path, s.query, s.key)
	}
	staff := &auth.Claims{Roles: []auth.Role{auth.Operator, auth.Approver, auth.Admin, auth.Service}}
	staff.Subject = "fuzz"
	ctx := auth.WithClaims(context.Background(), staff)
	f.Fuzz(func(t *testing.T, body []byte, path, query, key string) {
		for name, decode := range decoders {
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://stock.test/", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			r.URL.RawQuery = query
			r.Header.Set("Idempotency-Key", key)
			r.SetPathValue("sku", path)
			r.SetPathValue("id", path)
			if _, err := decode(ctx, r); err != nil {
				if s := errs.Error(err).Status; s < 400 || s > 499 {
					t.Fatalf("%s: bad input answered %d: %v", name, s, err)
				}
			}
		}
	})
}
