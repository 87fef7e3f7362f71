package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/stock/internal/config"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

func TestWatchSKUs(t *testing.T) {
	cfg, err := config.Load(nil)
	require.NoError(t, err)
	assert.Empty(t, cfg.WatchSKUs, "none watched by default")

	cfg, err = config.Load([]string{"STOCK_WATCH_SKUS=HOT-1, HOT-2,"})
	require.NoError(t, err)
	assert.Equal(t, []string{"HOT-1", "HOT-2"}, cfg.WatchSKUs)

	_, err = config.Load([]string{"STOCK_WATCH_SKUS=HOT-1,no spaces inside"})
	require.ErrorIs(t, err, stock.ErrBadSKU)
	assert.ErrorContains(t, err, "STOCK_WATCH_SKUS")
}

func TestAvailabilitySettings(t *testing.T) {
	cfg, err := config.Load(nil)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, cfg.AvailabilityTTL, "the seed's 5 s by default")
	assert.Equal(t, int64(10), cfg.AvailabilityLow)

	cases := []struct {
		name, env string
		ok        bool
	}{
		{"shortest ttl", "STOCK_AVAILABILITY_TTL=100ms", true},
		{"longest ttl", "STOCK_AVAILABILITY_TTL=1m", true},
		{"zero ttl", "STOCK_AVAILABILITY_TTL=0s", false},
		{"ttl too short", "STOCK_AVAILABILITY_TTL=99ms", false},
		{"ttl too long", "STOCK_AVAILABILITY_TTL=61s", false},
		{"no low status", "STOCK_AVAILABILITY_LOW=0", true},
		{"negative low", "STOCK_AVAILABILITY_LOW=-1", false},
		{"low past the largest quantity", "STOCK_AVAILABILITY_LOW=1000000001", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Load([]string{c.env})
			if c.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, strings.SplitN(c.env, "=", 2)[0])
			}
		})
	}
}
