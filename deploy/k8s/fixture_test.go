package k8s_test

import (
	"testing"

	"github.com/stockflow/stockflow/deploy/k8s"
)

// fixtureValidator validates testdata: one service, stock, reading six variables, and the
// one Secret testdata/good references without containing.
func fixtureValidator(t *testing.T) *k8s.Validator {
	t.Helper()
	return &k8s.Validator{
		CRDs:            loadCRDs(t),
		Env:             map[string][]string{"stock": {"HTTP_ADDR", "DATABASE_URL", "NATS_URL", "AUTH_SERVICE_KEY", "LOG_LEVEL", "STOCK_ORDER_URL"}},
		ExternalSecrets: map[string][]string{"stock-auth": {"service.jwk"}},
	}
}
