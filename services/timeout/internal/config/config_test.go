package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/timeout/internal/config"
)

func TestDefaults(t *testing.T) {
	cfg, err := config.Load(nil)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8084", cfg.HTTPAddr)
	assert.Equal(t, "postgres://postgres@127.0.0.1:5432/stockflow_timeout", cfg.DatabaseURL)
	assert.Equal(t, 5*time.Second, cfg.SweepInterval)
	assert.Equal(t, 500, cfg.SweepBatch)
}

func TestSweepSettings(t *testing.T) {
	cfg, err := config.Load([]string{"TIMEOUT_SWEEP_INTERVAL=500ms"})
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, cfg.SweepInterval)
	_, err = config.Load([]string{"TIMEOUT_SWEEP_INTERVAL=1ms"})
	assert.ErrorContains(t, err, "TIMEOUT_SWEEP_INTERVAL")
	_, err = config.Load([]string{"TIMEOUT_SWEEP_BATCH=0"})
	assert.ErrorContains(t, err, "TIMEOUT_SWEEP_BATCH")
	_, err = config.Load([]string{"TIMEOUT_COMBINE_MAX_BATCH=0"})
	assert.ErrorContains(t, err, "TIMEOUT_COMBINE_MAX_BATCH")
}
