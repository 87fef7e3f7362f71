package reconcile

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/httpx"
)

// FuzzDecoders feeds arbitrary bodies, job names and queries to the reconcile admin API's
// decoders. Properties: no panic; every error is a 4xx (the *httpx.Error it is, or its
// mapping in the error table).
func FuzzDecoders(f *testing.F) {
	for _, s := range []struct{ body, job, query string }{
		{``, "outbox", "mode=check"},
		{`{"mode":"repair"}`, "outbox", ""},
		{`{"mode":"repair"}`, "outbox", "mode=check"},
		{`{"mode":"bogus"}`, "nope", "mode=bogus"},
		{`{"mode":"check","extra":1}`, "outbox", ""},
		{``, "", "job=outbox&limit=5"},
		{``, "", "limit=0"},
		{``, "", "limit=99999999999999999999"},
		{`{"mode":"a\u0000b"}`, "a\x00b", "mode=%00&limit=%ff"},
		{`{"mode":` + strings.Repeat(`[`, 10001), "outbox", ""},
		{`{"mode":5}`, "outbox", ""},
		{`null`, "outbox", ""},
	} {
		f.Add([]byte(s.body), s.job, s.query)
	}
	decoders := map[string]kithttp.DecodeRequestFunc{"run": httpx.Decoder(decodeRun), "runs": httpx.Decoder(decodeRuns)}
	f.Fuzz(func(t *testing.T, body []byte, job, query string) {
		for name, decode := range decoders {
			r, err := http.NewRequest(http.MethodPost, "http://reconcile.test/", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			r.URL.RawQuery = query
			r.SetPathValue("job", job)
			if _, err := decode(context.Background(), r); err != nil {
				if status := errs.Error(err).Status; status < 400 || status > 499 {
					t.Fatalf("%s: bad input answered %d: %v", name, status, err)
				}
			}
		}
	})
}
