package k8s_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/deploy/k8s"
)

// want is one expected problem: its check, object and a part of its detail.
type want struct {
	check  k8s.Check
	object string // "Kind namespace/name", or "Kind name" for cluster-scoped
	detail string
}

func TestGoodFixtureHasNoProblems(t *testing.T) {
	probs := fixtureValidator(t).Check(filepath.Join("testdata", "good"))
	assert.Empty(t, probs, k8s.Problems(probs))
}

// TestBrokenManifests shows that every check fails on a broken manifest: each case in
// testdata/broken is testdata/good with one thing broken, and reports exactly that.
func TestBrokenManifests(t *testing.T) {
	cases := []struct {
		name string
		want []want
	}{
		{"deployment-unknown-field", []want{{k8s.CheckSchema, "Deployment shop/stock", `unknown field "spec.template.spec.containers[0].readinessProbes"`}}},
		{"deployment-wrong-type", []want{{k8s.CheckSchema, "Deployment shop/stock", "cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"}}},
		{"duplicate-field", []want{{k8s.CheckRender, "Kustomization testdata/broken/duplicate-field", `mapping key "LOG_LEVEL" already defined`}}},
		{"unknown-kind", []want{
			{k8s.CheckKind, "HorizontalPodAutoscaler old", "unknown apiVersion/kind autoscaling/v1 HorizontalPodAutoscaler"},
			{k8s.CheckKind, "Widget w", "unknown apiVersion/kind example.com/v1 Widget"},
		}},
		{"cnpg-unknown-field", []want{{k8s.CheckSchema, "Cluster shop/stock-db", `unknown field "spec.instancess"`}}},
		{"cnpg-wrong-type", []want{{k8s.CheckSchema, "Cluster shop/stock-db", "spec.instances in body must be of type integer"}}},
		{"httproute-cel", []want{{k8s.CheckSchema, "HTTPRoute shop/public", "value must be an absolute path and start with '/'"}}},
		{"httproute-admin", []want{{k8s.CheckRoute, "HTTPRoute shop/public", "rule orders: path PathPrefix /v1/admin admits /v1/admin"}}},
		{"httproute-prefix-v1", []want{{k8s.CheckRoute, "HTTPRoute shop/public", "rule orders: path PathPrefix /v1 admits /v1/admin"}}},
		{"httproute-no-matches", []want{{k8s.CheckRoute, "HTTPRoute shop/public", "rule orders: path PathPrefix / admits /v1/admin"}}},
		{"no-limits", []want{
			{k8s.CheckResources, "Deployment shop/stock", "container stock has no cpu limit"},
			{k8s.CheckResources, "Deployment shop/stock", "container stock has no memory limit"},
		}},
		{"init-container-no-resources", []want{
			{k8s.CheckResources, "Deployment shop/stock", "init container wait has no cpu request"},
			{k8s.CheckResources, "Deployment shop/stock", "init container wait has no cpu limit"},
			{k8s.CheckResources, "Deployment shop/stock", "init container wait has no memory request"},
			{k8s.CheckResources, "Deployment shop/stock", "init container wait has no memory limit"},
		}},
		{"no-probes", []want{
			{k8s.CheckProbes, "Deployment shop/stock", "container stock has no readinessProbe"},
			{k8s.CheckProbes, "Deployment shop/stock", "container stock has no livenessProbe"},
		}},
		{"root", []want{
			{k8s.CheckSecurity, "Deployment shop/stock", "container stock does not set runAsNonRoot: true"},
			{k8s.CheckSecurity, "Deployment shop/stock", "container stock does not set readOnlyRootFilesystem: true"},
			{k8s.CheckSecurity, "Deployment shop/stock", "container stock does not set allowPrivilegeEscalation: false"},
		}},
		{"no-pdb", []want{{k8s.CheckPDB, "Deployment shop/stock", "no PodDisruptionBudget selects its pods (app=stock)"}}},
		{"pdb-other-pods", []want{{k8s.CheckPDB, "Deployment shop/stock", "no PodDisruptionBudget selects its pods (app=stock)"}}},
		{"no-hpa", []want{{k8s.CheckHPA, "Deployment shop/stock", "no HorizontalPodAutoscaler targets it"}}},
		{"image-latest", []want{{k8s.CheckImage, "Deployment shop/stock", "image registry.example.com/stockflow/stock:latest is tagged latest"}}},
		{"image-no-tag", []want{{k8s.CheckImage, "Deployment shop/stock", "image registry.example.com:5000/stockflow/stock has no tag"}}},
		{"env-no-source", []want{{k8s.CheckEnv, "Deployment shop/stock", "stock reads STOCK_ORDER_URL, which has no source"}}},
		{"env-missing-secret", []want{
			{k8s.CheckEnv, "Deployment shop/stock", `NATS_URL reads key "url" of Secret nats-credentials, which is not in the manifests nor a known external Secret`},
			{k8s.CheckEnv, "Deployment shop/stock", "stock reads NATS_URL, which has no source"},
		}},
		{"env-missing-key", []want{
			{k8s.CheckEnv, "Deployment shop/stock", `DATABASE_URL reads key "url" of Secret stock-db-app, which has no such key`},
			{k8s.CheckEnv, "Deployment shop/stock", "stock reads DATABASE_URL, which has no source"},
		}},
		{"no-deployment", []want{{k8s.CheckEnv, "Deployment stock", "no Deployment runs service stock"}}},
	}
	v := fixtureValidator(t)
	tested := map[string]bool{}
	for _, tc := range cases {
		tested[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "broken", tc.name)
			probs := v.Check(filepath.ToSlash(dir))
			require.Len(t, probs, len(tc.want), k8s.Problems(probs))
			for i, w := range tc.want {
				p := probs[i]
				assert.Equal(t, w.check, p.Check, p.String())
				assert.True(t, strings.HasPrefix(p.String(), w.object+": "), "object: want %q in %s", w.object, p)
				assert.Contains(t, p.Detail, w.detail)
			}
		})
	}
	dirs, err := os.ReadDir(filepath.Join("testdata", "broken"))
	require.NoError(t, err)
	for _, d := range dirs {
		assert.True(t, tested[d.Name()], "testdata/broken/%s has no case", d.Name())
	}
}
