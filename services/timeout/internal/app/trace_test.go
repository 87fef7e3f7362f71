package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
)

// TestSweptExpiryContinuesTheTraceOfItsLock: the sweeper has no trace of its own, so the
// timeout.expired it writes carries the trace context of the stock.locked that scheduled the
// deadline, as the fired schedule message does.
func TestSweptExpiryContinuesTheTraceOfItsLock(t *testing.T) {
	e := setup(t, 10)
	const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := telemetry.WithTraceparent(context.Background(), traceparent) // as in a consumer span
	ev := events.StockLocked{OrderID: "ord-traced", Lines: []events.Line{{SKU: "S", Qty: 1}}, PaymentDeadline: time.Now().Add(-time.Second)}
	require.NoError(t, e.svc.ScheduleDeadline(ctx, inbox.Message{Consumer: "timeout-stock-locked", ID: "locked-traced"}, ev))
	e.lock("ord-untraced", time.Now().Add(-time.Second))

	n, err := e.svc.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	headers := map[string]map[string]string{}
	rows, err := e.pool.Query(context.Background(), `SELECT event_id, headers FROM outbox WHERE subject = $1`, events.SubjectTimeoutExpired)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var h map[string]string
		require.NoError(t, rows.Scan(&id, &h))
		headers[id] = h
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, traceparent, headers["timeout-expired:ord-traced"]["traceparent"])
	assert.Empty(t, headers["timeout-expired:ord-untraced"]["traceparent"], "scheduled outside any trace")
}
