package events_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockflow/stockflow/pkg/events"
)

// hostileBodies are seeds no producer writes: huge numbers, NUL, deep nesting, wrong types,
// times at the edge of what JSON can carry. (Inputs that once failed are in testdata/fuzz/.)
var hostileBodies = []string{
	``,
	`null`,
	`[]`,
	`{}`,
	`{"id":"x","type":"order.created","schema_version":1,"data":null}`,
	`{"id":"x","type":"order.created","schema_version":1e400,"data":{}}`,
	`{"id":"x","type":"order.created","schema_version":99999999999999999999,"data":{}}`,
	`{"id":"x","type":"stock.locked","schema_version":1,"data":{"order_id":"o","lines":[{"sku":"A","qty":99999999999999999999}],"payment_deadline":"2026-03-01T10:45:30Z"}}`,
	`{"id":"x","type":"stock.locked","schema_version":1,"data":{"order_id":"o","lines":[{"sku":"A","qty":-1}],"payment_deadline":"2026-03-01T10:45:30Z"}}`,
	`{"id":"a\u0000b","type":"stock.sold","schema_version":1,"data":{"order_id":"a\u0000b"}}`,
	`{"id":"x","type":"stock.sold","schema_version":1,"data":{"order_id":"\ud800"}}`,
	"{\"id\":\"x\",\"type\":\"stock.sold\",\"schema_version\":1,\"data\":{\"order_id\":\"\xff\xfe\"}}",
	`{"id":"x","type":"stock.sold","schema_version":1,"data":{"order_id":1}}`,
	`{"id":"x","type":"stock.sold","schema_version":"1","data":{"order_id":"o"}}`,
	`{"id":"x","type":"stock.sold","schema_version":1,"occurred_at":"0000-01-01T00:00:00+23:59","data":{"order_id":"o"}}`,
	`{"id":"x","type":"timeout.expired","schema_version":1,"data":{"order_id":"o","deadline":"0001-01-01T00:00:00Z"}}`,
	`{"id":"x","type":"timeout.expired","schema_version":1,"data":{"order_id":"o","deadline":"9999-12-31T23:59:59.999999999-23:59"}}`,
	`{"id":"x","type":"stock.sold","schema_version":1,"data":{"order_id":"o"},"data":{"order_id":""}}`,
	`{"id":"x","type":"stock.sold","schema_version":1,"data":` + strings.Repeat(`{"a":`, 2000) + `1` + strings.Repeat(`}`, 2000) + `}`,
	strings.Repeat(`[`, 20000),
}

// FuzzDecode feeds arbitrary bytes to every event's decoder. Properties: no decoder panics;
// every error wraps events.ErrMalformed (so consumers dead-letter the message instead of
// retrying it forever: natsx.IsPermanent); an event that decodes and validates re-encodes, and
// the re-encoding decodes to the same value (compared in its canonical encoding: time zones
// decode to distinct *time.Location values).
func FuzzDecode(f *testing.F) {
	// Every release's fixtures (testdata/v<major>.<minor>/): what any producer still running writes.
	files, err := filepath.Glob(filepath.Join("testdata", "v*", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, b := range hostileBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, c := range contract {
			subject := c.want.Subject()
			env, ev, err := c.decode(body)
			if err != nil {
				if !errors.Is(err, events.ErrMalformed) {
					t.Fatalf("%s: error does not wrap ErrMalformed: %v", subject, err)
				}
				continue
			}
			first, err := events.EncodeWithID(env.ID, ev, env.OccurredAt)
			if err != nil {
				t.Fatalf("%s: a decoded event does not re-encode: %v", subject, err)
			}
			env2, ev2, err := c.decode(first.Data)
			if err != nil {
				t.Fatalf("%s: a re-encoded event does not decode: %v\n%s", subject, err, first.Data)
			}
			if env2.ID != env.ID || env2.Type != env.Type || !env2.OccurredAt.Equal(env.OccurredAt) {
				t.Fatalf("%s: envelope changed in the round trip: %+v → %+v", subject, env, env2)
			}
			second, err := events.EncodeWithID(env2.ID, ev2, env2.OccurredAt)
			if err != nil {
				t.Fatalf("%s: second encoding: %v", subject, err)
			}
			if !bytes.Equal(first.Data, second.Data) {
				t.Fatalf("%s: the round trip changed the event:\n%s\n%s", subject, first.Data, second.Data)
			}
		}
	})
}
