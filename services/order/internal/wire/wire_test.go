package wire_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/services/order/internal/config"
	"github.com/stockflow/stockflow/services/order/internal/wire"
)

func TestBuild(t *testing.T) {
	pool, _ := pgtest.New(t, wire.Schemas()...)
	cfg, err := config.Load(nil)
	require.NoError(t, err)
	handler, consumers := wire.Build(pool, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, pool.Ping, authtest.New(t).Verifier)

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	assert.Equal(t, http.StatusOK, rec.Code)

	got := map[string]string{}
	for _, c := range consumers {
		require.NotNil(t, c.Handle)
		assert.NotEmpty(t, c.Spec.FilterSubjects)
		got[c.Spec.Durable] = c.Spec.Stream
	}
	assert.Equal(t, map[string]string{"order-stock-outcomes": natsx.StreamStock, "order-payment-outcomes": natsx.StreamPayment}, got)
}
