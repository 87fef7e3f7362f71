package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/httpapi"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
)

// queryCounter is a pgx tracer counting every query its pool runs.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (*queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// storefront is the stock API with its availability read model, which reads through a pool of
// its own whose queries are counted.
type storefront struct {
	*api
	avail   *app.Availability
	queries *queryCounter
	meters  *sdkmetric.ManualReader
	run     func() (stop func()) // starts the refresh loop; stop waits for it to end, as the test's end does
}

func newStorefront(t testing.TB, ttl time.Duration) *storefront {
	pool, url := pgtest.New(t, service.Schemas(postgres.Schema)...)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	queries := &queryCounter{}
	cfg.ConnConfig.Tracer = queries
	readPool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(readPool.Close)

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(context.Background())) })

	svc := app.New(postgres.NewStore(pool))
	avail := app.NewAvailability(postgres.NewStore(readPool), app.AvailabilityOptions{TTL: ttl, Low: 10, Meters: mp})
	kit := authtest.New(t, "order")
	h := httpapi.Handler(svc, slog.New(slog.DiscardHandler), func(context.Context) error { return nil }, kit.Verifier, httpapi.WithAvailability(avail))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := &storefront{avail: avail, queries: queries, meters: reader}
	if tt, ok := t.(*testing.T); ok {
		s.api = &api{t: tt, srv: srv, pool: pool, kit: kit}
	} else {
		s.api = &api{srv: srv, pool: pool, kit: kit}
	}
	s.run = func() func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- avail.Run(ctx) }()
		stop := sync.OnceFunc(func() { cancel(); assert.NoError(t, <-done) })
		t.Cleanup(stop)
		return stop
	}
	return s
}

// refreshes is how many refreshes the read model made, failed ones included.
func (s *storefront) refreshes(t testing.TB) int64 {
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.meters.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "stockflow.stock.availability.refreshes" {
				for _, p := range sum.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
}

type availabilityBody struct {
	AsOf          time.Time `json:"as_of"`
	MaxAgeSeconds int64     `json:"max_age_seconds"`
	SKUs          []struct {
		SKU       string `json:"sku"`
		Available int64  `json:"available"`
		Status    string `json:"status"`
	} `json:"skus"`
	Unknown []string `json:"unknown"`
	Error   *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// get asks GET /v1/availability?query with no token: the route is public.
func (s *storefront) get(t assert.TestingT, client *http.Client, query string) (int, http.Header, availabilityBody) {
	var body availabilityBody
	resp, err := client.Get(s.srv.URL + "/v1/availability?" + query)
	if !assert.NoError(t, err) {
		return 0, nil, body
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	assert.NoError(t, err)
	assert.NoError(t, json.Unmarshal(raw, &body), "body %s", raw)
	return resp.StatusCode, resp.Header, body
}

func (b availabilityBody) available(sku string) int64 {
	for _, s := range b.SKUs {
		if s.SKU == sku {
			return s.Available
		}
	}
	return -1
}

// A sale shows on the storefront with a refresh, not before: every answer shows the old figure
// or the new one, the new one once the snapshot was read after the sale, and never the old one
// again after that. Unknown SKUs are listed apart; a repeated SKU is answered once.
func TestAvailabilityShowsASaleAfterARefresh(t *testing.T) {
	s := newStorefront(t, 200*time.Millisecond)
	for _, body := range []string{`{"sku":"CUP-1","on_hand":300}`, `{"sku":"MUG-1","on_hand":5}`, `{"sku":"GONE-1","on_hand":0}`} {
		status, _ := s.do("POST", "/v1/skus", body)
		require.Equal(t, http.StatusCreated, status)
	}
	s.run()
	c := http.DefaultClient

	status, h, b := s.get(t, c, "sku=CUP-1,MUG-1&sku=NOPE-1&sku=GONE-1,CUP-1")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	assert.Equal(t, "public, max-age="+strconv.FormatInt(b.MaxAgeSeconds, 10), h.Get("Cache-Control"))
	assert.LessOrEqual(t, b.MaxAgeSeconds, int64(0), "a 200 ms TTL is no whole second")
	require.Len(t, b.SKUs, 3)
	for i, want := range [][3]any{{"CUP-1", int64(300), "in_stock"}, {"MUG-1", int64(5), "low"}, {"GONE-1", int64(0), "sold_out"}} {
		assert.Equal(t, want, [3]any{b.SKUs[i].SKU, b.SKUs[i].Available, b.SKUs[i].Status})
	}
	assert.Equal(t, []string{"NOPE-1"}, b.Unknown)

	status, _ = s.do("POST", "/v1/internal/locks", `{"order_id":"o1","items":[{"sku":"CUP-1","qty":2}],"payment_timeout":"10m"}`)
	require.Equal(t, http.StatusCreated, status)
	status, _ = s.do("POST", "/v1/internal/orders/o1/sell", ``)
	require.Equal(t, http.StatusOK, status)
	sold := time.Now()

	var seenNew bool
	deadline := time.Now().Add(10 * time.Second)
	for !seenNew {
		require.True(t, time.Now().Before(deadline), "the sale never showed")
		status, _, b := s.get(t, c, "sku=CUP-1")
		require.Equal(t, http.StatusOK, status)
		switch n := b.available("CUP-1"); {
		case n == 298:
			seenNew = true
		case n == 300:
			assert.True(t, b.AsOf.Before(sold), "a snapshot read after the sale shows it")
		default:
			require.Failf(t, "neither figure", "available %d", n)
		}
	}
	for range 20 {
		_, _, b := s.get(t, c, "sku=CUP-1")
		assert.Equal(t, int64(298), b.available("CUP-1"), "snapshots only get newer")
	}
}

// Bad input is 400 with a stable code, answered without the snapshot, and writes nothing.
func TestAvailabilityBadInput(t *testing.T) {
	s := newStorefront(t, time.Minute)
	status, _ := s.do("POST", "/v1/skus", `{"sku":"CUP-1","on_hand":3}`)
	require.Equal(t, http.StatusCreated, status)
	s.run()
	repeat := func(sep string, n int) string {
		skus := make([]string, n)
		for i := range skus {
			skus[i] = fmt.Sprintf("S-%d", i)
		}
		return "sku=" + strings.Join(skus, sep)
	}
	status, _, b := s.get(t, http.DefaultClient, repeat(",", 100))
	require.Equal(t, http.StatusOK, status, "100 SKUs is the limit, not past it")
	assert.Len(t, b.Unknown, 100)

	cases := []struct {
		name, query string
		code        string
	}{
		{"no sku", "", "missing_sku"},
		{"other keys only", "skus=CUP-1&page=2", "missing_sku"},
		{"101 skus in one value", repeat(",", 101), "too_many_skus"},
		{"101 repeated keys", repeat("&sku=", 101), "too_many_skus"},
		{"101 repeats of one sku", strings.Repeat("sku=CUP-1&", 101), "too_many_skus"},
		{"empty sku", "sku=", "invalid_sku_query"},
		{"empty element", "sku=CUP-1,,MUG-1", "invalid_sku_query"},
		{"trailing comma", "sku=CUP-1,", "invalid_sku_query"},
		{"space inside", "sku=has%20space", "invalid_sku_query"},
		{"65 characters", "sku=" + strings.Repeat("S", 65), "invalid_sku_query"},
		{"NUL", "sku=a%00b", "invalid_sku_query"},
		{"malformed escape", "sku=%zz", "invalid_query"},
		{"semicolon", "sku=CUP-1;MUG-1", "invalid_query"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, queries := s.written(), s.queries.n.Load()
			status, h, b := s.get(t, http.DefaultClient, c.query)
			assert.Equal(t, http.StatusBadRequest, status)
			require.NotNil(t, b.Error)
			assert.Equal(t, c.code, b.Error.Code)
			assert.Empty(t, h.Get("Cache-Control"))
			assert.Equal(t, before, s.written(), "a refused request writes nothing")
			assert.Equal(t, queries, s.queries.n.Load(), "nor reads")
		})
	}
}

// Before any snapshot the route answers 503 availability_not_ready (Retry-After: 1), at once
// once the first refresh has failed; a route without a read model answers the same.
func TestAvailabilityNotReady(t *testing.T) {
	s := newStorefront(t, time.Minute)
	require.Error(t, s.avail.Refresh(cancelled()), "a refresh that cannot reach the database")
	status, h, b := s.get(t, http.DefaultClient, "sku=CUP-1")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	require.NotNil(t, b.Error)
	assert.Equal(t, "availability_not_ready", b.Error.Code)
	assert.Equal(t, "1", h.Get("Retry-After"))

	bare := httptest.NewServer(httpapi.Handler(app.New(postgres.NewStore(s.pool)), slog.New(slog.DiscardHandler), nil, s.kit.Verifier))
	t.Cleanup(bare.Close)
	resp, err := http.Get(bare.URL + "/v1/availability?sku=CUP-1")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// 1,000 requests made concurrently, the first ones before the first snapshot, cost the
// database one query: the first refresh (the TTL, a minute, outlasts the test).
func TestAvailabilityIsOneQueryPerRefresh(t *testing.T) {
	s := newStorefront(t, time.Minute)
	_, err := s.pool.Exec(context.Background(), seedSKUs, 1000)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 50}}
	t.Cleanup(client.CloseIdleConnections)

	var wg sync.WaitGroup
	var ok atomic.Int64
	for w := range 50 {
		wg.Go(func() {
			for i := range 20 {
				sku := fmt.Sprintf("SEED-%d", (w*20+i)%1000+1)
				status, _, b := s.get(t, client, "sku="+sku+",NOPE-1")
				if assert.Equal(t, http.StatusOK, status) && assert.Equal(t, int64(7), b.available(sku)) {
					ok.Add(1)
				}
			}
		})
	}
	s.run() // after the requests have started: the first ones wait for the first snapshot
	wg.Wait()
	assert.Equal(t, int64(1000), ok.Load())
	assert.Equal(t, int64(1), s.queries.n.Load(), "one refresh, one query")
	assert.Equal(t, int64(1), s.refreshes(t))
}

// seedSKUs makes $1 SKUs SEED-1… with 7 available over two slots, written directly (a
// storefront's catalogue; the ledger is not needed to read availability).
const seedSKUs = `WITH n AS (SELECT 'SEED-' || i AS sku FROM generate_series(1, $1::int) i),
	s AS (INSERT INTO sku (sku, slots) SELECT sku, 2 FROM n RETURNING sku)
	INSERT INTO sku_stock (sku, slot, on_hand, available) SELECT sku, slot, 3 + slot, 3 + slot FROM s, generate_series(0, 1) slot`
