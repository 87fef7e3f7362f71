package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// fuzzTarget has a field of each kind the services decode into.
type fuzzTarget struct {
	Name  string           `json:"name"`
	Qty   int64            `json:"qty"`
	Ptr   *int64           `json:"ptr"`
	Items []fuzzItem       `json:"items"`
	Flag  bool             `json:"flag"`
	Raw   json.RawMessage  `json:"raw"`
	Meta  map[string]int32 `json:"meta"`
}

type fuzzItem struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// FuzzDecodeJSON feeds arbitrary bodies to DecodeJSON and UnmarshalStrict. Properties: no
// panic; every error is an *Error with a 4xx status (bad input is never a 500); what decodes
// re-encodes and decodes strictly to the same value.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"name":"CUP-1","qty":300}`,
		`{"name":"x","qty":1,"items":[{"sku":"A","qty":2}],"flag":true,"raw":{"a":[1,2]},"meta":{"k":1}}`,
		`{"ptr":null}`,
		`{"name":`,
		`{"name":"X","qty":1,"stock":5}`,
		`{"name":"X","qty":1} {}`,
		`{"qty":99999999999999999999}`,
		`{"qty":1e400}`,
		`{"qty":"5"}`,
		`{"meta":{"k":2147483648}}`,
		`{"name":"a\u0000b"}`,
		"{\"name\":\"\xff\"}",
		`{"name":"\ud800"}`,
		`[]`,
		`null`,
		``,
		`{"raw":` + strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001) + `}`,
		`{"items":[` + strings.Repeat(`{"sku":"A","qty":1},`, 200) + `{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var got fuzzTarget
		err = DecodeJSON(r, &got)
		var strict fuzzTarget
		if serr := UnmarshalStrict(body, &strict); (serr == nil) != (err == nil) {
			t.Fatalf("DecodeJSON says %v, UnmarshalStrict %v", err, serr)
		}
		if err != nil {
			var he *Error
			if !errors.As(err, &he) || he.Status < 400 || he.Status > 499 {
				t.Fatalf("bad input is not a 4xx *Error: %#v", err)
			}
			return
		}
		again, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", got, err)
		}
		var round fuzzTarget
		if err := UnmarshalStrict(again, &round); err != nil {
			t.Fatalf("re-encoded body %s does not decode: %v", again, err)
		}
		if !reflect.DeepEqual(normalRaw(got), normalRaw(round)) {
			t.Fatalf("round trip changed the value of %.200q:\n%.500s", body, again)
		}
	})
}

// normalRaw compacts Raw, which json.Marshal re-indents, and reads a JSON null as none (a nil
// RawMessage encodes as null).
func normalRaw(v fuzzTarget) fuzzTarget {
	if string(v.Raw) == "null" {
		v.Raw = nil
	}
	if v.Raw != nil {
		var b bytes.Buffer
		if json.Compact(&b, v.Raw) == nil {
			v.Raw = b.Bytes()
		}
	}
	return v
}
