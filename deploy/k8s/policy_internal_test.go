package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestAdmits(t *testing.T) {
	cases := []struct {
		name  string
		typ   gatewayv1.PathMatchType
		value string
		want  string // the admin path admitted, "" for none
	}{
		{"public prefix", gatewayv1.PathMatchPathPrefix, "/v1/orders", ""},
		{"public exact", gatewayv1.PathMatchExact, "/v1/callbacks/stripe", ""},
		{"root prefix admits all", gatewayv1.PathMatchPathPrefix, "/", "/v1/admin"},
		{"v1 prefix admits all under it", gatewayv1.PathMatchPathPrefix, "/v1", "/v1/admin"},
		{"v1 prefix with slash", gatewayv1.PathMatchPathPrefix, "/v1/", "/v1/admin"},
		{"prefix is element-wise", gatewayv1.PathMatchPathPrefix, "/v1/ad", ""},
		{"prefix below admin", gatewayv1.PathMatchPathPrefix, "/v1/internal/locks", "/v1/internal"},
		{"exact admin", gatewayv1.PathMatchExact, "/metrics", "/metrics"},
		{"exact below admin", gatewayv1.PathMatchExact, "/v1/skus/abc", "/v1/skus"},
		{"dot segments", gatewayv1.PathMatchExact, "/v1/orders/../reconcile", "/v1/reconcile"},
		{"exact sibling", gatewayv1.PathMatchExact, "/metricsx", ""},
		{"regex wide", gatewayv1.PathMatchRegularExpression, "^/v1/.*", "/v1/admin"},
		{"regex narrow", gatewayv1.PathMatchRegularExpression, "^/v1/orders(/[^/]+/cancel)?$", ""},
		{"regex broken", gatewayv1.PathMatchRegularExpression, "(", "anything (the expression does not compile as Go RE2: error parsing regexp: missing closing ): `(`)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, admits(tc.typ, tc.value, DefaultAdminPaths))
		})
	}
}

func TestImageProblem(t *testing.T) {
	cases := []struct{ image, want string }{
		{"registry.example.com/stockflow/order:0.1.0", ""},
		{"nats:2.15.2-alpine", ""},
		{"registry.example.com:5000/stockflow/order:1.2", ""},
		{"ghcr.io/x/y@sha256:0123", ""},
		{"stockflow/order", "image stockflow/order has no tag"},
		{"registry.example.com:5000/order", "image registry.example.com:5000/order has no tag"},
		{"stockflow/order:latest", "image stockflow/order:latest is tagged latest"},
		{"", "no image"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, imageProblem(tc.image), tc.image)
	}
	assert.Equal(t, "payment-adapter", imageService("registry.example.com:5000/stockflow/payment-adapter:0.1.0@sha256:ab"))
}

func TestParseEnv(t *testing.T) {
	names, err := parseEnv([]byte("HTTP_ADDR\nDATABASE_URL\tsecret\nNATS_URL\tsecret\tdefault=nats://x\n\nLOG_LEVEL\tdefault=INFO\nCLOCK_OFFSET\tunset\tdefault=0s\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"HTTP_ADDR", "DATABASE_URL", "NATS_URL", "LOG_LEVEL"}, names, "a deployment leaves CLOCK_OFFSET unset")

	_, err = parseEnv([]byte("HTTP_ADDR\n{\"level\":\"INFO\"}\n"))
	assert.Error(t, err, "a line that is not a variable name (a log line on stdout) is an error")
	_, err = parseEnv(nil)
	assert.Error(t, err, "an empty listing is an error")
}
