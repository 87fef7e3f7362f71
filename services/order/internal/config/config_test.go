package config_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/order/internal/config"
)

func TestLoadDefaults(t *testing.T) {
	cfg, err := config.Load(nil)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8081", cfg.HTTPAddr)
	assert.Equal(t, "postgres://postgres@127.0.0.1:5432/stockflow_order", cfg.DatabaseURL)
	assert.Equal(t, "nats://127.0.0.1:14222", cfg.NATSURL)
	assert.True(t, cfg.AutoMigrate)
	assert.Equal(t, 30*time.Minute, cfg.PaymentTimeout)
	assert.Equal(t, 128, cfg.CombineMaxBatch)
}

func TestLoadOverridesAndValidates(t *testing.T) {
	cfg, err := config.Load([]string{"PAYMENT_TIMEOUT=10m", "AUTO_MIGRATE=false", "HTTP_ADDR=:9000"})
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, cfg.PaymentTimeout)
	assert.False(t, cfg.AutoMigrate)
	assert.Equal(t, ":9000", cfg.HTTPAddr)

	for _, bad := range []string{"PAYMENT_TIMEOUT=0s", "PAYMENT_TIMEOUT=25h", "PAYMENT_TIMEOUT=soon", "DATABASE_URL=mysql://x",
		"ORDER_COMBINE_MAX_BATCH=0", "ORDER_COMBINE_MAX_BATCH=1001"} {
		_, err := config.Load([]string{bad})
		assert.Error(t, err, bad)
	}
}

func TestStartupLogMasksPassword(t *testing.T) {
	cfg, err := config.Load([]string{"DATABASE_URL=postgres://app:s3cret@db/orders"})
	require.NoError(t, err)
	out := fmt.Sprint(service.LogAttrs(cfg))
	assert.NotContains(t, out, "s3cret")
	assert.Contains(t, out, "PAYMENT_TIMEOUT")
}
