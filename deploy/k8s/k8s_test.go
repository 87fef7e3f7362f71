package k8s_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/deploy/k8s"
)

// crds loads the CRDs the manifests use, once: CloudNativePG from the copy in testdata (its
// README says where from) and the Gateway API standard channel from the module the Go types
// come from (sigs.k8s.io/gateway-api in deploy/go.mod), so the schema and the types the
// route check reads are one release.
var crds = sync.OnceValues(func() (k8s.CRDs, error) {
	set, err := k8s.LoadCRDDir(filepath.Join("testdata", "crds", "cloudnative-pg"))
	if err != nil {
		return nil, err
	}
	dir, err := gatewayAPIDir()
	if err != nil {
		return nil, err
	}
	gw, err := k8s.LoadCRDDir(filepath.Join(dir, "config", "crd", "standard"))
	if err != nil {
		return nil, err
	}
	set.Add(gw)
	return set, nil
})

// gatewayAPIDir is the module cache directory of the sigs.k8s.io/gateway-api version
// deploy/go.mod requires.
func gatewayAPIDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func loadCRDs(t *testing.T) k8s.CRDs {
	t.Helper()
	set, err := crds()
	require.NoError(t, err)
	return set
}

// serviceEnv builds the four services and the console once and lists the variables each reads.
var serviceEnv = sync.OnceValues(func() (map[string][]string, error) {
	bin, err := os.MkdirTemp("", "stockflow-env-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bin)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	return k8s.ServiceEnv(context.Background(), root, bin, envEnviron, k8s.Services...)
})

// envEnviron is the environment `<svc> env` runs with: none, as a deployment check has (env
// needs no valid configuration).
var envEnviron = []string{}

// externalSecrets are the Secrets deploy/k8s/README.md ("Before the first apply") says are
// created out of band, with their keys; the dev overlay generates the first two.
var externalSecrets = map[string][]string{
	"stockflow-nats-users":      {"admin", "order", "stock", "payment-adapter", "timeout"},
	"stockflow-redis":           {"url"},
	"payment-adapter-providers": {"sandbox-secret", "stripe-api-key", "stripe-webhook-secret", "wechatpay-merchant-private-key", "wechatpay-apiv3-key", "alipay-app-private-key"},
}

func TestOverlays(t *testing.T) {
	env, err := serviceEnv()
	require.NoError(t, err)
	v := k8s.Validator{CRDs: loadCRDs(t), Env: env, ExternalSecrets: externalSecrets}
	for _, overlay := range []string{"dev", "prod"} {
		t.Run(overlay, func(t *testing.T) {
			dir := filepath.Join("overlays", overlay)
			probs := v.Check(dir)
			if len(probs) > 0 {
				t.Errorf("%s: %d problems:\n%s", dir, len(probs), k8s.Problems(probs))
			}
		})
	}
}

// TestServiceEnv holds the listing to each service's config: the shared settings and one of
// the service's own.
func TestServiceEnv(t *testing.T) {
	env, err := serviceEnv()
	require.NoError(t, err)
	own := map[string]string{"order": "ORDER_STOCK_URL", "stock": "STOCK_ORDER_URL", "payment-adapter": "PAYMENT_SANDBOX_SECRET", "timeout": "TIMEOUT_SWEEP_INTERVAL"}
	for svc, name := range own {
		require.Contains(t, env, svc)
		for _, v := range []string{"HTTP_ADDR", "DATABASE_URL", "NATS_URL", name} {
			assert.Contains(t, env[svc], v, svc)
		}
	}
	// The console reads its own settings only (no database, broker or key), and its local
	// demonstration's report is marked unset, so a deployment gives it no source.
	require.Contains(t, env, "console")
	assert.Contains(t, env["console"], "HTTP_ADDR")
	assert.Contains(t, env["console"], "CONSOLE_STOCK_URL")
	assert.NotContains(t, env["console"], "DATABASE_URL")
	assert.NotContains(t, env["console"], "CONSOLE_COMPARE_REPORT")
}
