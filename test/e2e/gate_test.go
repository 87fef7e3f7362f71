package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// buyers places n one-unit orders of sku at once, each by a new buyer, and returns the
// answers' statuses by count and the ids of the orders created.
func (c client) buyers(n int, sku string) (map[int]int, []string) {
	c.t.Helper()
	var mu sync.Mutex
	codes, ids := map[int]int{}, []string{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			status, body := c.place("u-"+randomHex(4), map[string]any{"items": []item{{SKU: sku, Qty: 1}}, "currency": "CNY"})
			mu.Lock()
			defer mu.Unlock()
			codes[status]++
			if status == http.StatusCreated {
				ids = append(ids, body["order_id"].(string))
			} else if status == http.StatusConflict {
				assert.Equal(c.t, "sold_out", errorCode(body), "%v", body)
			}
		})
	}
	wg.Wait()
	return codes, ids
}

// TestGateThroughASaleWithRedisStoppedMidway: the gate admits exactly what the database has;
// sold-out buyers get 409 sold_out and cost no order; with Redis stopped mid-sale buyers are
// not refused (the database path decides, no oversell); when Redis is back the gate job arms
// the SKU again from the database, and the gate and the database agree to the unit.
func TestGateThroughASaleWithRedisStoppedMidway(t *testing.T) {
	c := client{t}
	sku := "GATE-" + randomHex(3)
	c.createSKU(sku, 100)
	status, body := c.call("POST", sys.URLs["stock"]+"/v1/skus/"+sku+"/gate", nil, nil)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, true, body["armed"])
	require.Equal(t, float64(100), body["remaining"])

	// 60 buyers, all admitted.
	codes, first := c.buyers(60, sku)
	require.Equal(t, map[int]int{http.StatusCreated: 60}, codes)

	// Redis goes away: 60 more buyers are served by the database path; only 40 units are left.
	require.NoError(t, sys.StopRedis())
	codes, second := c.buyers(60, sku)
	require.Equal(t, map[int]int{http.StatusCreated: 60}, codes, "a Redis outage never refuses a buyer")
	awaiting, rejected := 0, 0
	for _, id := range append(first, second...) {
		require.Eventually(t, func() bool {
			switch c.getOrder(id)["status"] {
			case "awaiting_payment":
				awaiting++
				return true
			case "rejected":
				rejected++
				return true
			}
			return false
		}, 30*time.Second, 20*time.Millisecond, "order %s never left pending", id)
	}
	assert.Equal(t, 100, awaiting, "every unit sold once")
	assert.Equal(t, 20, rejected)
	f := c.sku(sku)
	assert.Equal(t, float64(100), f["locked"])
	assert.Equal(t, float64(0), f["available"])

	// Redis returns empty; the gate job arms the SKU again from the database: nothing left.
	// A give-back the gate job decided in the run that raced the re-arm can leave Redis over
	// for a moment (seen in CI: remaining 20, drift -20); the job corrects a drift it sees
	// twice, so within a few of its 500 ms runs the gate and the database agree.
	require.NoError(t, sys.StartRedis(context.Background()))
	require.Eventually(t, func() bool {
		status, body = c.call("GET", sys.URLs["stock"]+"/v1/skus/"+sku+"/gate", nil, nil)
		return status == http.StatusOK && body["armed"] == true && body["remaining"] == float64(0) && body["drift"] == float64(0)
	}, 30*time.Second, 100*time.Millisecond, "the gate was not re-armed with nothing left: %v", body)

	// The order service's breaker lets calls through again within seconds; then the storm's
	// late buyers are all turned away by the gate, and none of them costs an order.
	require.Eventually(t, func() bool {
		codes, _ := c.buyers(1, sku)
		return codes[http.StatusConflict] == 1
	}, 30*time.Second, 200*time.Millisecond, "the gate never answered sold_out again")
	codes, late := c.buyers(30, sku)
	assert.Equal(t, map[int]int{http.StatusConflict: 30}, codes)
	assert.Empty(t, late)

	// A release gives its unit back to the gate: cancel one order and a new buyer gets it.
	status, body = c.call("POST", sys.URLs["order"]+"/v1/orders/"+first[0]+"/cancel", nil, nil)
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	require.Eventually(t, func() bool {
		_, body = c.call("GET", sys.URLs["stock"]+"/v1/skus/"+sku+"/gate", nil, nil)
		return body["remaining"] == float64(1)
	}, 30*time.Second, 100*time.Millisecond, "the cancelled order's unit never came back to the gate: %v", body)
	// The order service remembers the sold_out for GATE_SOLD_OUT_TTL; its own give-back
	// forgets at once, one by stock's gate job (which races it) only when that expires.
	require.Eventually(t, func() bool {
		codes, _ = c.buyers(1, sku)
		return codes[http.StatusCreated] == 1
	}, 10*time.Second, 100*time.Millisecond, "the unit given back was never sold: %v %v", codes, body)
	c.requireConsistent()
}
