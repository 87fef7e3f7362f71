package config_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/config"
)

func TestLoadDefaults(t *testing.T) {
	cfg, err := config.Load(nil)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8081", cfg.HTTPAddr)
	assert.Equal(t, "postgres://postgres@127.0.0.1:5432/stockflow_order", cfg.DatabaseURL)
	assert.Equal(t, "nats://127.0.0.1:14222", cfg.NATSURL)
	assert.True(t, cfg.AutoMigrate)
	assert.Equal(t, 30*time.Minute, cfg.PaymentWindow)
	assert.Equal(t, time.Minute, cfg.MinPaymentWindow)
	assert.Equal(t, 128, cfg.CombineMaxBatch)
	assert.Equal(t, 500*time.Millisecond, cfg.GateSoldOutTTL)
	assert.Equal(t, app.Policy{
		PaymentWindow: 30 * time.Minute, MinPaymentWindow: time.Minute, PriceCacheTTL: 2 * time.Second,
		PerBuyer: app.RateLimit{Rate: 5, Burst: 10},
	}, cfg.Policy(), "5 orders/s per buyer in bursts of 10; no limit per SKU")
}

func TestLoadOverridesAndValidates(t *testing.T) {
	cfg, err := config.Load([]string{"ORDER_PAYMENT_WINDOW=10m", "ORDER_MIN_PAYMENT_WINDOW=1s", "AUTO_MIGRATE=false", "HTTP_ADDR=:9000",
		"ORDER_RATE_PER_SKU=2.5"})
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, cfg.PaymentWindow)
	assert.Equal(t, time.Second, cfg.MinPaymentWindow)
	assert.False(t, cfg.AutoMigrate)
	assert.Equal(t, ":9000", cfg.HTTPAddr)
	assert.Equal(t, app.RateLimit{Rate: 2.5, Burst: 3}, cfg.Policy().PerSKU, "the burst defaults to the rate, rounded up")

	for _, bad := range []string{"ORDER_PAYMENT_WINDOW=0s", "ORDER_PAYMENT_WINDOW=25h", "ORDER_PAYMENT_WINDOW=soon",
		"ORDER_PAYMENT_WINDOW=30s", // below ORDER_MIN_PAYMENT_WINDOW's 1m
		"ORDER_MIN_PAYMENT_WINDOW=500ms", "ORDER_PRICE_CACHE_TTL=-1s", "ORDER_PRICE_CACHE_TTL=2m",
		"ORDER_RATE_PER_BUYER=-1", "ORDER_RATE_PER_SKU_BURST=-1", "DATABASE_URL=mysql://x",
		"ORDER_COMBINE_MAX_BATCH=0", "ORDER_COMBINE_MAX_BATCH=1001", "GATE_SOLD_OUT_TTL=-1s", "GATE_SOLD_OUT_TTL=6s"} {
		_, err := config.Load([]string{bad})
		assert.Error(t, err, bad)
	}
}

func TestStartupLogMasksPassword(t *testing.T) {
	cfg, err := config.Load([]string{"DATABASE_URL=postgres://app:s3cret@db/orders"})
	require.NoError(t, err)
	out := fmt.Sprint(service.LogAttrs(cfg))
	assert.NotContains(t, out, "s3cret")
	assert.Contains(t, out, "ORDER_PAYMENT_WINDOW")
}
