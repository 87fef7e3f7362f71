package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/natsx"
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
	assert.Contains(t, lines, "CLOCK_OFFSET\tunset\tdefault=0s\n", "deployments leave it unset")
	assert.NotContains(t, lines, "skip")

	out.Reset()
	require.NoError(t, Main(context.Background(), []string{"--version"}, &out, spec))
	assert.Equal(t, "thing dev\n", out.String())

	err := Main(context.Background(), []string{"frobnicate"}, &out, spec)
	assert.ErrorContains(t, err, "HTTP_ADDR is empty", "every other command validates first")
}

// A consumer whose database is down waits the outage out; its other errors keep their budget.
func TestOutageAwareMarksOnlyDatabaseOutages(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := l.Addr().String()
	require.NoError(t, l.Close())
	_, refused := pgx.Connect(ctx, "postgres://postgres@"+down+"/postgres?connect_timeout=2")
	require.Error(t, refused)

	for _, tc := range []struct {
		name              string
		err               error
		unavailable, perm bool
	}{
		{"database refused", fmt.Errorf("lock order: %w", refused), true, false},
		{"a handler error", errors.New("stock service answered 500"), false, false},
		{"poison stays poison", natsx.Permanent(fmt.Errorf("decode: %w", refused)), false, true},
		{"done", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := outageAware(func(context.Context, jetstream.Msg) error { return tc.err })(ctx, nil)
			assert.Equal(t, tc.unavailable, natsx.IsUnavailable(got), "%v", got)
			assert.Equal(t, tc.perm, natsx.IsPermanent(got), "%v", got)
			assert.ErrorIs(t, got, tc.err)
		})
	}
}
