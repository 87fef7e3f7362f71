package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/gate/redistest"
	"github.com/stockflow/stockflow/services/order/internal/app"
)

// gatedEnv is the API with a gate on a private Redis, sold_out remembered for ttl, CUP-1
// armed with one unit and MUG-2 with five.
func gatedEnv(t testing.TB, ttl time.Duration) (*env, *gate.Gate) {
	t.Helper()
	g, err := gate.New(gate.Config{RedisURL: redistest.Start(t).URL, Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	e := setupWith(t, app.Policy{PaymentWindow: 30 * time.Minute}, app.WithGate(g), app.WithSoldOutTTL(ttl))
	require.NoError(t, g.Arm(context.Background(), "CUP-1", 1))
	require.NoError(t, g.Arm(context.Background(), "MUG-2", 5))
	return e, g
}

const (
	oneCup = `{"buyer_id": "%s", "items": [{"sku": "CUP-1", "qty": 1}]}`
	oneMug = `{"items": [{"sku": "MUG-2", "qty": 1}]}`
)

func (e *env) rows(t *testing.T) int {
	t.Helper()
	return e.count(t, `SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM order_history) + (SELECT count(*) FROM outbox)`)
}

// placeAs places body with key under the Authorization header bearer ("": none).
func (e *env) placeAs(t testing.TB, bearer, key, body string) response {
	t.Helper()
	return e.do(t, http.MethodPost, "/v1/orders", map[string]string{"Authorization": bearer, "Idempotency-Key": key}, body)
}

// TestSoldOutIsAnsweredBeforeTheToken: once the gate answered sold_out for CUP-1, a POST for
// it is 409 sold_out with or without a token, forged or not, and writes nothing; a SKU armed
// but not sold out, or a malformed body, still needs the token (401 without it, the normal
// 4xx with it).
func TestSoldOutIsAnsweredBeforeTheToken(t *testing.T) {
	e, _ := gatedEnv(t, time.Hour)
	u1, u2 := e.kit.Bearer("u1", auth.Buyer), e.kit.Bearer("u2", auth.Buyer)
	require.Equal(t, http.StatusCreated, e.placeAs(t, u1, "k1", fmt.Sprintf(oneCup, "u1")).status)
	lost := e.placeAs(t, u2, "k2", fmt.Sprintf(oneCup, "u2"))
	require.Equal(t, http.StatusConflict, lost.status, "%v", lost.body)
	require.Equal(t, "sold_out", lost.code(), "the gate's answer")
	before := e.rows(t)

	forged := authtest.New(t).Bearer("u3", auth.Buyer)
	for _, c := range []struct {
		name, bearer, body string
		status             int
		code               string
	}{
		{"sold out, no token", "", fmt.Sprintf(oneCup, "u3"), 409, "sold_out"},
		{"sold out, forged token", forged, fmt.Sprintf(oneCup, "u3"), 409, "sold_out"},
		{"sold out, no key", "", fmt.Sprintf(oneCup, "u3"), 409, "sold_out"},
		{"sold out among other lines", "", `{"items": [{"sku": "MUG-2", "qty": 1}, {"sku": "CUP-1", "qty": 1}]}`, 409, "sold_out"},
		{"armed, not sold out, no token", "", oneMug, 401, "unauthenticated"},
		{"malformed, no token", "", `{"items": [{"sku": "CUP-1", "qty": 1}`, 401, "unauthenticated"},
		{"malformed, with token", u2, `{"items": [{"sku": "CUP-1", "qty": 1}`, 400, "malformed_json"},
		{"unknown field, with token", u2, `{"items": [{"sku": "CUP-1", "qty": 1}], "x": 1}`, 409, "sold_out"},
		{"not JSON, no token", "", `sku=CUP-1`, 401, "unauthenticated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "k-" + c.name
			if c.name == "sold out, no key" {
				key = ""
			}
			got := e.placeAs(t, c.bearer, key, c.body)
			assert.Equal(t, c.status, got.status, "%v", got.body)
			assert.Equal(t, c.code, got.code())
			if c.code == "sold_out" {
				assert.Contains(t, got.message(), "CUP-1")
			}
			assert.Equal(t, before, e.rows(t), "nothing written")
		})
	}

	// The buyer of a MUG-2, which has units left, goes the whole way.
	mug := e.placeAs(t, u2, "k-mug", oneMug)
	assert.Equal(t, http.StatusCreated, mug.status, "%v", mug.body)
}

// TestSoldOutMemoryExpires: a unit given back to the gate (by a release on any replica) is
// seen once the memory expires: the next buyer's token is checked again and the gate
// admits them.
func TestSoldOutMemoryExpires(t *testing.T) {
	const ttl = 200 * time.Millisecond
	e, g := gatedEnv(t, ttl)
	u1, u2 := e.kit.Bearer("u1", auth.Buyer), e.kit.Bearer("u2", auth.Buyer)
	won := e.placeAs(t, u1, "k1", fmt.Sprintf(oneCup, "u1"))
	require.Equal(t, http.StatusCreated, won.status, "%v", won.body)
	require.Equal(t, "sold_out", e.placeAs(t, u2, "k2", fmt.Sprintf(oneCup, "u2")).code())

	n, err := g.GiveBack(context.Background(), won.body["order_id"].(string))
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	time.Sleep(ttl + 50*time.Millisecond) // past the TTL (a monotonic clock): not a timing assert

	assert.Equal(t, http.StatusUnauthorized, e.placeAs(t, "", "k3", fmt.Sprintf(oneCup, "u3")).status, "the token is checked again")
	again := e.placeAs(t, u2, "k4", fmt.Sprintf(oneCup, "u2"))
	assert.Equal(t, http.StatusCreated, again.status, "the unit given back is sold: %v", again.body)
}

// BenchmarkLosingPlacement is the cost of a sold-out buyer's POST /v1/orders through the API
// (an HTTP round trip in process): "remembered" answered before the token check, "asks the
// gate" (no memory) after the token check, the quote and the Redis call.
func BenchmarkLosingPlacement(b *testing.B) {
	for _, c := range []struct {
		name string
		ttl  time.Duration
	}{{"remembered", time.Hour}, {"asks the gate", 0}} {
		b.Run(c.name, func(b *testing.B) {
			e, _ := gatedEnv(b, c.ttl)
			u := e.kit.Bearer("u2", auth.Buyer)
			body := fmt.Sprintf(oneCup, "u2")
			require.Equal(b, http.StatusCreated, e.placeAs(b, e.kit.Bearer("u1", auth.Buyer), "k1", fmt.Sprintf(oneCup, "u1")).status)
			for i := 0; b.Loop(); i++ {
				req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/orders", strings.NewReader(body))
				req.Header.Set("Authorization", u)
				req.Header.Set("Idempotency-Key", fmt.Sprintf("b-%d", i))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusConflict {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
