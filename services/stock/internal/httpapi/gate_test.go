package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/gate/redistest"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/httpapi"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
)

// newGateAPI is the API with the gate routes on a private redis-server.
func newGateAPI(t *testing.T) (*api, *gate.Gate) {
	a := newAPI(t)
	srv := redistest.Start(t)
	g, err := gate.New(gate.Config{RedisURL: srv.URL, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	store := postgres.NewStore(a.pool)
	h := httpapi.Handler(app.New(store), slog.New(slog.DiscardHandler), func(context.Context) error { return nil }, a.kit.Verifier,
		httpapi.WithGates(app.NewGates(store, g, time.Hour)))
	a.srv.Close()
	a.srv = httptest.NewServer(h)
	t.Cleanup(a.srv.Close)
	return a, g
}

func TestGateRoutesArmViewDisarm(t *testing.T) {
	a, g := newGateAPI(t)
	ctx := context.Background()
	status, _ := a.do("POST", "/v1/skus", `{"sku":"HOT","on_hand":100}`)
	require.Equal(t, http.StatusCreated, status)
	status, _ = a.do("POST", "/v1/internal/locks", `{"order_id":"o-1","items":[{"sku":"HOT","qty":3}]}`)
	require.Equal(t, http.StatusCreated, status)

	// Armed now (an empty body), from the database's available.
	status, body := a.do("POST", "/v1/skus/HOT/gate", ``)
	require.Equal(t, http.StatusOK, status, "body %v", body)
	assert.Equal(t, true, body["armed"])
	assert.Equal(t, float64(97), body["remaining"])
	assert.Equal(t, "ops", body["armed_by"])
	assert.Equal(t, float64(0), body["drift"])
	st, err := g.State(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, int64(97), st.Remaining)

	// A viewer sees it; a viewer may not arm or disarm it.
	viewer := a.kit.Bearer("eve", auth.Viewer)
	status, body = a.do("GET", "/v1/skus/HOT/gate", ``, "Authorization", viewer)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, float64(97), body["available"])
	for _, m := range []string{"POST", "DELETE"} {
		status, body = a.do(m, "/v1/skus/HOT/gate", ``, "Authorization", viewer)
		assert.Equal(t, http.StatusForbidden, status, m)
		assert.Equal(t, "forbidden", errCode(body), m)
	}

	// Planned ahead: a plan, not armed yet (the gate job arms it at its time).
	status, _ = a.do("POST", "/v1/skus", `{"sku":"LATER","on_hand":10}`)
	require.Equal(t, http.StatusCreated, status)
	at := time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
	status, body = a.do("POST", "/v1/skus/LATER/gate", `{"arm_at":"`+at+`"}`)
	require.Equal(t, http.StatusOK, status, "body %v", body)
	assert.Equal(t, true, body["planned"])
	assert.Equal(t, false, body["armed"])
	assert.Equal(t, at, body["arm_at"])

	status, body = a.do("DELETE", "/v1/skus/HOT/gate", ``)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, false, body["armed"])
	assert.Equal(t, false, body["planned"])
	armed, err := g.Armed(ctx)
	require.NoError(t, err)
	assert.NotContains(t, armed, "HOT")
}

func TestGateRoutesRefuseBadInput(t *testing.T) {
	a, g := newGateAPI(t)
	status, _ := a.do("POST", "/v1/skus", `{"sku":"HOT","on_hand":5}`)
	require.Equal(t, http.StatusCreated, status)
	far := time.Now().Add(httpapi.MaxArmAhead + time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed json", "POST", "/v1/skus/HOT/gate", `{"arm_at":`, 400, "malformed_json"},
		{"unknown field", "POST", "/v1/skus/HOT/gate", `{"remaining":5}`, 400, "malformed_json"},
		{"arm_at not a time", "POST", "/v1/skus/HOT/gate", `{"arm_at":"tomorrow"}`, 400, "malformed_json"},
		{"arm_at too far", "POST", "/v1/skus/HOT/gate", `{"arm_at":"` + far + `"}`, 422, "invalid_arm_at"},
		{"bad sku", "POST", "/v1/skus/has%20space/gate", ``, 422, "invalid_sku"},
		{"unknown sku", "POST", "/v1/skus/NOPE/gate", ``, 404, "sku_not_found"},
		{"view unknown sku", "GET", "/v1/skus/NOPE/gate", ``, 404, "sku_not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := a.do(c.method, c.path, c.body)
			assert.Equal(t, c.status, status, "body %v", body)
			assert.Equal(t, c.code, errCode(body))
		})
	}
	armed, err := g.Armed(context.Background())
	require.NoError(t, err)
	assert.Empty(t, armed, "no bad request armed anything")
	var plans int
	require.NoError(t, a.pool.QueryRow(context.Background(), `SELECT count(*) FROM sku_gate`).Scan(&plans))
	assert.Zero(t, plans, "no bad request stored a plan")
}

func TestGateRoutesWithoutRedisAnswer503(t *testing.T) {
	a := newAPI(t) // no WithGates: no REDIS_URL
	status, _ := a.do("POST", "/v1/skus", `{"sku":"HOT","on_hand":5}`)
	require.Equal(t, http.StatusCreated, status)
	for _, m := range []string{"POST", "GET", "DELETE"} {
		status, body := a.do(m, "/v1/skus/HOT/gate", ``)
		assert.Equal(t, http.StatusServiceUnavailable, status, m)
		assert.Equal(t, "gate_unavailable", errCode(body), m)
	}
}
