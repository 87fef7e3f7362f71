package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stockflow/stockflow/pkg/httpx"
)

// FuzzDecodeOrderID feeds arbitrary order ids to the decoder of GET /v1/deadlines/{order_id}.
// Properties: no panic; an error is a 4xx *httpx.Error.
func FuzzDecodeOrderID(f *testing.F) {
	for _, id := range []string{"ord-1", "", strings.Repeat("o", 129), "a\x00b", "\xff", "../../etc"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		r, err := http.NewRequest(http.MethodGet, "http://timeout.test/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.SetPathValue("order_id", id)
		if _, err := decodeOrderID(context.Background(), r); err != nil {
			var he *httpx.Error
			if !errors.As(err, &he) || he.Status < 400 || he.Status > 499 {
				t.Fatalf("bad input is not a 4xx *httpx.Error: %#v", err)
			}
		}
	})
}
