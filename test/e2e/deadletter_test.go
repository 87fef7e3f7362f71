package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/natsx"
)

// TestDeadLetterReplayThroughTheStockProcess puts a dead-letter copy of an order's
// order.created in DEADLETTER, as stock's consumer would have written it, after stock has
// applied the order. Every service refuses the dead-letter routes without a token, with a
// forged or an expired one, and to roles they do not admit (viewers read none, operators do
// not replay). The stock process lists and shows it to an operator and replays it for an admin
// through its own consumer's handler: the inbox holds the order's claim, so neither that
// replay nor a second one changes the stock or its ledger. The order service, whose consumers
// did not write it, answers 409.
func TestDeadLetterReplayThroughTheStockProcess(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 10)
	id := c.order("30m", item{SKU: sku, Qty: 3, UnitPrice: 100})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	require.Equal(t, [4]float64{10, 7, 3, 0}, figures(c, sku))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js := jetStream(t)
	stream, err := js.Stream(ctx, natsx.StreamOrder)
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	var orig *jetstream.RawStreamMsg
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0 && orig == nil; seq-- {
		if m, err := stream.GetMsg(ctx, seq); err == nil && strings.HasPrefix(m.Subject, "order.created.") && contains(m.Data, id) {
			orig = m
		}
	}
	require.NotNil(t, orig, "order.created of %s not found", id)
	dl := nats.NewMsg(natsx.SubjectDeadLetterPrefix + orig.Subject)
	dl.Data = orig.Data
	for k, v := range map[string]string{
		natsx.HeaderDLSubject: orig.Subject, natsx.HeaderDLStream: natsx.StreamOrder, natsx.HeaderDLStreamSeq: fmt.Sprint(orig.Sequence),
		natsx.HeaderDLConsumer: "stock-order-created", natsx.HeaderDLDeliveries: "20", natsx.HeaderDLReason: "exhausted",
		natsx.HeaderDLError: "stock-order-created: simulated outage",
	} {
		dl.Header.Set(k, v)
	}
	ack, err := js.PublishMsg(ctx, dl)
	require.NoError(t, err)
	show := fmt.Sprintf("%s/v1/admin/deadletters/%d", sys.URLs["stock"], ack.Sequence)
	as := func(role auth.Role) map[string]string {
		return map[string]string{"Authorization": "Bearer " + token(t, "dlq-"+string(role), role)}
	}

	forged := map[string]string{"Authorization": "Bearer " + forgedToken(t)}
	signer, err := sys.Signer()
	require.NoError(t, err)
	expiredToken, err := signer.MintAt("olga", []auth.Role{auth.Admin}, "", time.Now().Add(-time.Hour), 10*time.Minute)
	require.NoError(t, err)
	expired := map[string]string{"Authorization": "Bearer " + expiredToken}
	for _, svc := range []string{"order", "stock", "payment-adapter", "timeout"} {
		for _, r := range []struct {
			method, path string
			denied       []auth.Role
		}{
			{"GET", "/v1/admin/deadletters", []auth.Role{auth.Viewer, auth.Buyer}},
			{"GET", fmt.Sprintf("/v1/admin/deadletters/%d", ack.Sequence), []auth.Role{auth.Viewer, auth.Approver}},
			{"POST", fmt.Sprintf("/v1/admin/deadletters/%d/replay", ack.Sequence), []auth.Role{auth.Viewer, auth.Operator}},
		} {
			u := sys.URLs[svc] + r.path
			status, body := c.call(r.method, u, nil, map[string]string{"Authorization": ""})
			assert.Equal(t, http.StatusUnauthorized, status, "no token %s %s: %v", r.method, u, body)
			status, body = c.call(r.method, u, nil, forged)
			assert.Equal(t, http.StatusUnauthorized, status, "forged token %s %s: %v", r.method, u, body)
			status, body = c.call(r.method, u, nil, expired)
			assert.Equal(t, http.StatusUnauthorized, status, "expired token %s %s: %v", r.method, u, body)
			for _, role := range r.denied {
				status, body = c.call(r.method, u, nil, as(role))
				assert.Equal(t, http.StatusForbidden, status, "%s %s as %s: %v", r.method, u, role, body)
			}
		}
	}
	require.Equal(t, [4]float64{10, 7, 3, 0}, figures(c, sku), "a refused replay changes nothing")
	status, body := c.call("GET", sys.URLs["stock"]+"/v1/admin/deadletters?consumer=stock-order-created", nil, as(auth.Operator))
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Contains(t, seqs(body), float64(ack.Sequence), "listed as pending")
	status, body = c.call("GET", show, nil, as(auth.Operator))
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Equal(t, "exhausted", body["reason"])
	assert.Equal(t, id, body["body"].(map[string]any)["data"].(map[string]any)["order_id"])
	status, body = c.call("GET", fmt.Sprintf("%s/v1/admin/deadletters/%d", sys.URLs["order"], ack.Sequence), nil, as(auth.Operator))
	assert.Equal(t, http.StatusConflict, status, "%v", body)
	assert.Equal(t, "other_consumer", errorCode(body))

	for i, wantAlready := range []bool{false, true} {
		status, body = c.call("POST", show+"/replay", nil, as(auth.Admin))
		require.Equal(t, http.StatusOK, status, "replay %d: %v", i+1, body)
		assert.Equal(t, wantAlready, body["already_replayed"], "replay %d", i+1)
		assert.Equal(t, [4]float64{10, 7, 3, 0}, figures(c, sku), "replay %d: the inbox absorbed it", i+1)
		assert.Equal(t, 1, countLedger(t, c, sku, "lock"), "replay %d", i+1)
	}
	status, body = c.call("GET", sys.URLs["stock"]+"/v1/admin/deadletters?consumer=stock-order-created", nil, as(auth.Admin))
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.NotContains(t, seqs(body), float64(ack.Sequence), "replayed: no longer pending")
}

// seqs are the sequences of a dead-letter list answer.
func seqs(list map[string]any) []any {
	var out []any
	dls, _ := list["dead_letters"].([]any)
	for _, d := range dls {
		out = append(out, d.(map[string]any)["seq"])
	}
	return out
}
