package app_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/services/timeout/internal/app"
)

// FuzzDecodeFired feeds arbitrary subjects and bodies to the decoder of a fired schedule.
// Properties: no panic; every error wraps events.ErrMalformed (the consumer terminates the
// message instead of retrying it); a body that decodes names the order of its subject, and a
// schedule encoded for that order decodes to it again.
func FuzzDecodeFired(f *testing.F) {
	at := time.Date(2030, 1, 1, 10, 0, 0, 250_000_000, time.UTC)
	good, err := events.EncodeWithID("timeout-schedule:ord-1", app.Scheduled{OrderID: "ord-1", Deadline: at}, at)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(natsx.FireSubject("ord-1"), good.Data)
	f.Add(natsx.FireSubject("ord-2"), good.Data)
	f.Add("timeout.fire.", good.Data)
	f.Add("stock.locked", good.Data)
	f.Add(natsx.FireSubject("a\x00b"), []byte(`{"id":"x","type":"timeout.schedule","schema_version":1,"data":{"order_id":"a\u0000b","deadline":"2030-01-01T10:00:00Z"}}`))
	f.Add(natsx.FireSubject("o"), []byte(`{"id":"x","type":"timeout.schedule","schema_version":1,"data":{"order_id":"o","deadline":1e400}}`))
	f.Add(natsx.FireSubject("o"), []byte(`{"id":"x","type":"timeout.schedule","schema_version":1,"data":"o"}`))
	f.Add(natsx.FireSubject("o"), []byte(`{"id":"x","type":"timeout.schedule","schema_version":1,"data":`+strings.Repeat(`[`, 5000)))
	f.Add(natsx.FireSubject("o"), []byte(nil))
	f.Fuzz(func(t *testing.T, subject string, body []byte) {
		orderID, err := app.DecodeFired(subject, body)
		if err != nil {
			if !errors.Is(err, events.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if orderID == "" || subject != natsx.SubjectFirePrefix+orderID {
			t.Fatalf("decoded order %q from subject %q", orderID, subject)
		}
		again, err := events.EncodeWithID("timeout-schedule:"+orderID, app.Scheduled{OrderID: orderID, Deadline: at}, at)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if id, err := app.DecodeFired(subject, again.Data); err != nil || id != orderID {
			t.Fatalf("re-encoded schedule decodes to %q, %v", id, err)
		}
	})
}
