package service

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// env and version need no database, no NATS and no valid configuration: a deployment check
// and an operator run them anywhere.
func TestEnvAndVersionNeedNothingRunning(t *testing.T) {
	type own struct {
		Base
		Window string `env:"THING_WINDOW" envDefault:"30m"`
		Key    string `env:"THING_KEY" secret:"true"`
		skip   string
	}
	cfg := &own{skip: "x"}
	require.NoError(t, LoadConfig(cfg, nil))
	spec := Spec{Name: "thing", Base: &cfg.Base, Config: cfg}

	var out bytes.Buffer
	require.NoError(t, Main(context.Background(), []string{"env"}, &out, spec))
	lines := out.String()
	assert.Contains(t, lines, "DATABASE_URL\tsecret\n")
	assert.Contains(t, lines, "NATS_STREAM_REPLICAS\tdefault=1\n")
	assert.Contains(t, lines, "THING_WINDOW\tdefault=30m\n")
	assert.Contains(t, lines, "THING_KEY\tsecret\n")
	assert.NotContains(t, lines, "skip")

	out.Reset()
	require.NoError(t, Main(context.Background(), []string{"--version"}, &out, spec))
	assert.Equal(t, "thing dev\n", out.String())

	err := Main(context.Background(), []string{"frobnicate"}, &out, spec)
	assert.ErrorContains(t, err, "HTTP_ADDR is empty", "every other command validates first")
}
