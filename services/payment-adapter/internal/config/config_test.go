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

func TestCombiningOutOfRangeIsRefused(t *testing.T) {
	for _, v := range []string{"0", "1001"} {
		_, err := config.Load([]string{"PAYMENT_SANDBOX_SECRET=s3cret", "PAYMENT_COMBINE_MAX_BATCH=" + v})
		assert.ErrorContains(t, err, "PAYMENT_COMBINE_MAX_BATCH", v)
	}
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

// A provider is on with all of its required settings, off with none, and refused with some;
// a key that does not parse is refused at startup, and the log masks the providers' secrets.
func TestProvidersAreAllOrNothing(t *testing.T) {
	base := []string{"PAYMENT_SANDBOX_SECRET=s"}
	cfg, err := config.Load(base)
	require.NoError(t, err)
	ps, err := cfg.Providers()
	require.NoError(t, err)
	require.Len(t, ps, 1, "the sandbox alone")

	stripeEnv := append(base, "PAYMENT_STRIPE_API_KEY=sk_test_very-secret", "PAYMENT_STRIPE_WEBHOOK_SECRET=whsec_also-secret")
	cfg, err = config.Load(stripeEnv)
	require.NoError(t, err)
	ps, err = cfg.Providers()
	require.NoError(t, err)
	require.Len(t, ps, 2)
	assert.Equal(t, "stripe", ps[1].Name())
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", service.LogAttrs(cfg)...)
	assert.NotContains(t, buf.String(), "very-secret")
	assert.NotContains(t, buf.String(), "also-secret")

	_, err = config.Load(append(base, "PAYMENT_STRIPE_API_KEY=sk_test_x"))
	require.ErrorContains(t, err, "Stripe is configured in part: PAYMENT_STRIPE_WEBHOOK_SECRET missing")
	_, err = config.Load(append(base, "PAYMENT_WECHATPAY_MCH_ID=1900000001"))
	require.ErrorContains(t, err, "WeChat Pay is configured in part")
	_, err = config.Load(append(base, "PAYMENT_ALIPAY_APP_ID=2021", "PAYMENT_ALIPAY_APP_PRIVATE_KEY=not-a-key", "PAYMENT_ALIPAY_PUBLIC_KEY=nor-this"))
	require.ErrorContains(t, err, "PAYMENT_ALIPAY_")
}
