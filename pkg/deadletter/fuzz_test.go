package deadletter

import (
	"context"
	"net/http"
	"testing"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/httpx"
)

// FuzzDecoders feeds arbitrary sequences and queries to the dead-letter admin API's decoders.
// Properties: no panic; every error is a 4xx (the *httpx.Error it is, or its mapping in the
// error table); a sequence that decodes is positive.
func FuzzDecoders(f *testing.F) {
	for _, s := range []struct{ seq, query string }{
		{"1", ""},
		{"42", "consumer=stock-order-created&limit=5"},
		{"0", "limit=0"},
		{"-1", "limit=-1"},
		{"18446744073709551616", "limit=99999999999999999999"},
		{"9223372036854775808", "state=bogus"},
		{"abc", "state=replayed&subject=order.created"},
		{" 1", "state=all&limit=500"},
		{"+1", "limit=501"},
		{"0x10", "limit=%ff&consumer=%00"},
		{"", "state="},
	} {
		f.Add(s.seq, s.query)
	}
	decoders := map[string]kithttp.DecodeRequestFunc{"list": httpx.Decoder(decodeList), "seq": httpx.Decoder(decodeSeq)}
	f.Fuzz(func(t *testing.T, seq, query string) {
		for name, decode := range decoders {
			r, err := http.NewRequest(http.MethodGet, "http://deadletter.test/", nil)
			if err != nil {
				t.Fatal(err)
			}
			r.URL.RawQuery = query
			r.SetPathValue("seq", seq)
			req, err := decode(context.Background(), r)
			if err != nil {
				if status := errs.Error(err).Status; status < 400 || status > 499 {
					t.Fatalf("%s: bad input answered %d: %v", name, status, err)
				}
				continue
			}
			if s, ok := req.(seqRequest); ok && s.seq == 0 {
				t.Fatalf("seq %q decoded to 0", seq)
			}
		}
	})
}
