package catalog_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/order/internal/catalog"
)

var at = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func TestNewRefusesTermsNoOrderCouldBePaidBy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sku       string
		price     int64
		currency  string
		window    time.Duration
		by        string
		wantError error
	}{
		{"free: providers refuse zero amounts", "CUP-1", 0, "CNY", 0, "ops", catalog.ErrInvalidPrice},
		{"negative", "CUP-1", -1, "CNY", 0, "ops", catalog.ErrInvalidPrice},
		{"bad sku", "-CUP", 1, "CNY", 0, "ops", catalog.ErrInvalidSKU},
		{"lower-case currency", "CUP-1", 1, "cny", 0, "ops", catalog.ErrInvalidCurrency},
		{"window under the minimum", "CUP-1", 1, "CNY", 59 * time.Second, "ops", catalog.ErrInvalidWindow},
		{"window over 24h", "CUP-1", 1, "CNY", 25 * time.Hour, "ops", catalog.ErrInvalidWindow},
		{"nobody", "CUP-1", 1, "CNY", 0, "", catalog.ErrInvalidOperator},
		{"an operator name too long", "CUP-1", 1, "CNY", 0, strings.Repeat("o", 129), catalog.ErrInvalidOperator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.New(tc.sku, tc.price, tc.currency, tc.window, time.Minute, at, tc.by)
			assert.ErrorIs(t, err, tc.wantError)
		})
	}
}

func TestNewAndRestore(t *testing.T) {
	p, err := catalog.New("CUP-1", 4900, "CNY", 10*time.Minute, time.Minute, at, "ops")
	require.NoError(t, err)
	assert.Equal(t, int64(4900), p.UnitPrice().Int64())
	assert.Equal(t, 10*time.Minute, p.PaymentWindow())
	// A window stored under a lower minimum than today's still reads back.
	r, err := catalog.Restore("CUP-1", 4900, "CNY", 2*time.Second, at, "ops")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, r.PaymentWindow())
	_, err = catalog.Restore("CUP-1", 0, "CNY", 0, at, "ops")
	assert.ErrorIs(t, err, catalog.ErrInvalidPrice, "a corrupt row is reported, not trusted")
}
