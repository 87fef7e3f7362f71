package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/tools/loadtest"
)

// TestLoadTestSmall runs the load test at 50 orders/s for 3 s against the test system: every
// order is accepted and locked, the checks pass, and the report prints its figures.
func TestLoadTestSmall(t *testing.T) {
	cfg := loadtest.Default()
	cfg.OrderURL, cfg.StockURL = sys.URLs["order"], sys.URLs["stock"]
	signer, err := sys.Signer()
	require.NoError(t, err)
	cfg.Signer = signer
	cfg.Rate, cfg.Duration, cfg.Grace = 50, 3*time.Second, 30*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := loadtest.Run(ctx, cfg, nil)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	t.Logf("\n%s", b.String())

	assert.False(t, rep.Failed(), "%+v", rep.Checks)
	assert.Equal(t, 150, rep.Sent)
	assert.Equal(t, map[int]int{201: 150}, rep.Codes)
	assert.Equal(t, map[string]int{"awaiting_payment": 150}, rep.ByStatus)
	assert.Equal(t, 150, rep.Awaited)
	assert.Positive(t, rep.AwaitP50)
	assert.GreaterOrEqual(t, rep.AwaitP99, rep.AwaitP50)
	assert.Equal(t, int64(150), rep.After.Locked)
	assert.Equal(t, int64(0), rep.After.Available, "units default to rate × duration")
}
