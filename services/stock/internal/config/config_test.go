package config_test

import (
	"testing"

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
