package config_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/config"
)

func TestDefaultsNeedOnlyTheSecret(t *testing.T) {
	cfg, err := config.Load([]string{"PAYMENT_SANDBOX_SECRET=s3cret"})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8083", cfg.HTTPAddr)
	assert.Equal(t, "postgres://postgres@127.0.0.1:5432/stockflow_payment", cfg.DatabaseURL)
	assert.True(t, cfg.AutoMigrate)
	assert.Equal(t, "s3cret", cfg.SandboxSecret)
}

func TestMissingSecretIsRefused(t *testing.T) {
	_, err := config.Load(nil)
	require.ErrorContains(t, err, "PAYMENT_SANDBOX_SECRET is required")
}

func TestLogMasksSecrets(t *testing.T) {
	cfg, err := config.Load([]string{
		"PAYMENT_SANDBOX_SECRET=very-secret-key",
		"DATABASE_URL=postgres://app:hunter2@db:5432/stockflow_payment",
	})
	require.NoError(t, err)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", service.LogAttrs(cfg)...)
	assert.NotContains(t, buf.String(), "very-secret-key")
	assert.NotContains(t, buf.String(), "hunter2")
	assert.Contains(t, buf.String(), "PAYMENT_SANDBOX_SECRET")
}
