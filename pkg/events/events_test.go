package events_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
)

// decoder is events.Decode for one payload type, with the payload as an Event.
type decoder func(body []byte) (events.Envelope, events.Event, error)

func as[T events.Event](decode func([]byte) (events.Envelope, T, error)) decoder {
	return func(body []byte) (events.Envelope, events.Event, error) {
		env, ev, err := decode(body)
		return env, ev, err
	}
}

var deadline = time.Date(2026, 3, 1, 10, 45, 30, 0, time.UTC)

// contract pins every event to its fixture of the current release,
// testdata/v<ContractVersion>/<subject>.json: the fixture decodes to exactly this value. Older
// releases' fixtures are held to it in contract_test.go.
var contract = []struct {
	decode decoder
	want   events.Event
}{
	{as(events.Decode[events.OrderCreated]), events.OrderCreated{
		OrderID: "ord-1", BuyerID: "buyer-7",
		Items: []events.OrderItem{
			{SKU: "SKU-RED-M", Qty: 2, UnitPrice: 1999},
			{SKU: "SKU-BLUE-L", Qty: 1, UnitPrice: 4500},
		},
		Total: 8498, Currency: "EUR", PaymentDeadline: deadline,
	}},
	{as(events.Decode[events.OrderCancelRequested]), events.OrderCancelRequested{OrderID: "ord-1", Reason: "buyer_cancelled"}},
	{as(events.Decode[events.OrderRefundRequested]), events.OrderRefundRequested{OrderID: "ord-1", Reason: "damaged"}},
	{as(events.Decode[events.OrderShipped]), events.OrderShipped{OrderID: "ord-1"}},
	{as(events.Decode[events.PaymentSucceeded]), events.PaymentSucceeded{
		PaymentID: "pay-1", OrderID: "ord-1", Provider: "acmepay", ProviderTxnID: "txn-42", Amount: 8498, Currency: "EUR",
	}},
	{as(events.Decode[events.PaymentFailed]), events.PaymentFailed{PaymentID: "pay-2", OrderID: "ord-1", Reason: "declined"}},
	{as(events.Decode[events.PaymentRefunded]), events.PaymentRefunded{PaymentID: "pay-1", OrderID: "ord-1", Amount: 8498}},
	{as(events.Decode[events.PaymentNothingToRefund]), events.PaymentNothingToRefund{OrderID: "ord-5"}},
	{as(events.Decode[events.PaymentRefundRequested]), events.PaymentRefundRequested{
		PaymentID: "pay-1", OrderID: "ord-1", RefundID: "refund-pay-1", Reason: "sell_failed: already_paid",
	}},
	{as(events.Decode[events.StockLocked]), events.StockLocked{
		OrderID: "ord-1", Lines: []events.Line{{SKU: "SKU-RED-M", Qty: 2}, {SKU: "SKU-BLUE-L", Qty: 1}}, PaymentDeadline: deadline,
	}},
	{as(events.Decode[events.StockLockRejected]), events.StockLockRejected{OrderID: "ord-2", Reason: "insufficient_stock", SKU: "SKU-RED-M"}},
	{as(events.Decode[events.StockSold]), events.StockSold{OrderID: "ord-1", Relocked: true}},
	{as(events.Decode[events.StockSellFailed]), events.StockSellFailed{OrderID: "ord-3", PaymentID: "pay-3", Reason: "released"}},
	{as(events.Decode[events.StockReleased]), events.StockReleased{OrderID: "ord-4", Reason: events.ReleaseTimeout}},
	{as(events.Decode[events.StockRestocked]), events.StockRestocked{OrderID: "ord-1"}},
	{as(events.Decode[events.StockShipped]), events.StockShipped{OrderID: "ord-1"}},
	{as(events.Decode[events.TimeoutExpired]), events.TimeoutExpired{OrderID: "ord-4", Deadline: deadline}},
}

func fixture(t *testing.T, subject string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(currentRelease, subject+".json"))
	require.NoError(t, err, "every event needs a fixture %s/%s.json", currentRelease, subject)
	return b
}

func TestFixturesDecode(t *testing.T) {
	for _, c := range contract {
		t.Run(c.want.Subject(), func(t *testing.T) {
			env, ev, err := c.decode(fixture(t, c.want.Subject()))
			require.NoError(t, err)
			assert.Equal(t, c.want.Subject(), env.Type)
			assert.Equal(t, 1, env.SchemaVersion)
			assert.NotEmpty(t, env.ID)
			assert.False(t, env.OccurredAt.IsZero())
			assert.Equal(t, c.want, ev)
		})
	}
}

func TestEveryFixtureBelongsToAnEvent(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(currentRelease, "*.json"))
	require.NoError(t, err)
	known := map[string]bool{}
	for _, c := range contract {
		known[c.want.Subject()] = true
	}
	for _, f := range files {
		subject := strings.TrimSuffix(filepath.Base(f), ".json")
		assert.True(t, known[subject], "fixture %s has no entry in the contract table", f)
	}
	assert.Len(t, files, len(contract))
}

func TestEncodeThenDecodeRoundTrips(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 15, 30, 0, time.FixedZone("CET", 3600))
	for _, c := range contract {
		t.Run(c.want.Subject(), func(t *testing.T) {
			m, err := events.Encode(c.want, at)
			require.NoError(t, err)
			assert.Equal(t, events.SubjectOf(c.want), m.Subject)
			env, ev, err := c.decode(m.Data)
			require.NoError(t, err)
			assert.Equal(t, m.ID, env.ID)
			assert.True(t, env.OccurredAt.Equal(at))
			assert.Equal(t, time.UTC, env.OccurredAt.Location(), "occurred_at is written in UTC")
			assert.Equal(t, c.want, ev)
		})
	}
}

func TestOrderCreatedIsPublishedUnderItsLowestSKUAsAToken(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 15, 30, 0, time.UTC)
	for _, c := range []struct {
		skus []string
		want string
	}{
		{[]string{"SKU-1"}, "order.created.SKU-1"},
		{[]string{"sku.b", "sku.a:2", "sku.c"}, "order.created.sku_a:2"},
		{[]string{"has space"}, "order.created.invalid"},
	} {
		ev := events.OrderCreated{OrderID: "o-1", Currency: "EUR", PaymentDeadline: at}
		for _, sku := range c.skus {
			ev.Items = append(ev.Items, events.OrderItem{SKU: sku, Qty: 1})
		}
		m, err := events.Encode(ev, at)
		require.NoError(t, err)
		assert.Equal(t, c.want, m.Subject)
		assert.Equal(t, "order.created.{key}", events.SubjectTemplate(m.Subject))
		env, got, err := events.Decode[events.OrderCreated](m.Data)
		require.NoError(t, err)
		assert.Equal(t, events.SubjectOrderCreated, env.Type, "the envelope's type has no key")
		assert.Equal(t, ev, got)
	}
}

func TestSubjectTemplateNamesOnlyAKey(t *testing.T) {
	for subject, want := range map[string]string{
		"order.created.SKU-1":   "order.created.{key}",
		"order.created.3.SKU-1": "order.created.{key}",
		"order.created":         "order.created",
		"stock.locked":          "stock.locked",
	} {
		assert.Equal(t, want, events.SubjectTemplate(subject), subject)
	}
}

// edit decodes a fixture into generic JSON, applies change and encodes it again.
func edit(t *testing.T, subject string, change func(env map[string]any, data map[string]any)) []byte {
	t.Helper()
	var env map[string]any
	require.NoError(t, json.Unmarshal(fixture(t, subject), &env))
	data, _ := env["data"].(map[string]any)
	change(env, data)
	b, err := json.Marshal(env)
	require.NoError(t, err)
	return b
}

func TestUnknownFieldsAreAccepted(t *testing.T) {
	body := edit(t, events.SubjectOrderCreated, func(env, data map[string]any) {
		env["trace_note"] = "added by a newer producer"
		data["coupon"] = map[string]any{"code": "SPRING", "percent": 10}
		data["items"].([]any)[0].(map[string]any)["gift_wrap"] = true
	})
	_, ev, err := events.Decode[events.OrderCreated](body)
	require.NoError(t, err)
	assert.Equal(t, contract[0].want, ev)
}

func TestMalformedInputIsErrMalformed(t *testing.T) {
	created := events.SubjectOrderCreated
	tests := []struct {
		name string
		body []byte
	}{
		{"bad json", []byte(`{"id": "x", "type": `)},
		{"not an object", []byte(`"order.created"`)},
		{"empty body", nil},
		{"wrong type", fixture(t, events.SubjectPaymentSucceeded)},
		{"schema version 2", edit(t, created, func(env, _ map[string]any) { env["schema_version"] = 2 })},
		{"schema version missing", edit(t, created, func(env, _ map[string]any) { delete(env, "schema_version") })},
		{"envelope without id", edit(t, created, func(env, _ map[string]any) { delete(env, "id") })},
		{"envelope without type", edit(t, created, func(env, _ map[string]any) { delete(env, "type") })},
		{"data missing", edit(t, created, func(env, _ map[string]any) { delete(env, "data") })},
		{"data of the wrong shape", edit(t, created, func(env, _ map[string]any) { env["data"] = "ord-1" })},
		{"field of the wrong type", edit(t, created, func(_, data map[string]any) { data["total"] = "lots" })},
		{"missing order_id", edit(t, created, func(_, data map[string]any) { delete(data, "order_id") })},
		{"missing payment_deadline", edit(t, created, func(_, data map[string]any) { delete(data, "payment_deadline") })},
		{"no items", edit(t, created, func(_, data map[string]any) { data["items"] = []any{} })},
		{"non-positive quantity", edit(t, created, func(_, data map[string]any) {
			data["items"].([]any)[0].(map[string]any)["qty"] = 0
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := events.Decode[events.OrderCreated](tc.body)
			assert.ErrorIs(t, err, events.ErrMalformed)
		})
	}
}

func TestEveryEventRejectsAMissingRequiredField(t *testing.T) {
	required := map[string]string{ // one required field per event
		events.SubjectOrderCreated:           "currency",
		events.SubjectOrderCancelRequested:   "order_id",
		events.SubjectOrderRefundRequested:   "order_id",
		events.SubjectOrderShipped:           "order_id",
		events.SubjectPaymentSucceeded:       "payment_id",
		events.SubjectPaymentFailed:          "reason",
		events.SubjectPaymentRefunded:        "order_id",
		events.SubjectPaymentRefundRequested: "refund_id",
		events.SubjectPaymentNothingToRefund: "order_id",
		events.SubjectStockLocked:            "lines",
		events.SubjectStockLockRejected:      "reason",
		events.SubjectStockSold:              "order_id",
		events.SubjectStockSellFailed:        "reason",
		events.SubjectStockReleased:          "reason",
		events.SubjectStockRestocked:         "order_id",
		events.SubjectStockShipped:           "order_id",
		events.SubjectTimeoutExpired:         "deadline",
	}
	for _, c := range contract {
		subject := c.want.Subject()
		field, ok := required[subject]
		require.True(t, ok, "no required field listed for %s", subject)
		t.Run(subject+" without "+field, func(t *testing.T) {
			_, _, err := c.decode(edit(t, subject, func(_, data map[string]any) { delete(data, field) }))
			assert.ErrorIs(t, err, events.ErrMalformed)
		})
	}
}
