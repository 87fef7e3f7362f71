package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
)

func TestStreamsCheckAndApply(t *testing.T) {
	ctx := context.Background()
	url := natstest.Start(t)
	env := map[string]string{"NATS_URL": url}
	streams := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"streams"}, args...), func(k string) string { return env[k] }, &out, io.Discard)
		return out.String(), err
	}

	out, err := streams("check")
	require.Error(t, err, "no stream exists yet")
	assert.Contains(t, out, "ORDER is missing")

	out, err = streams("apply")
	require.NoError(t, err)
	assert.Contains(t, out, "applied")
	out, err = streams("check")
	require.NoError(t, err, out)

	// An operator's change is a difference check reports and apply undoes, not a service.
	nc, js, err := natsx.Connect(ctx, url, t.Name())
	require.NoError(t, err)
	defer nc.Close()
	changed := natsx.StreamConfigs(1)[1]
	changed.MaxAge = time.Hour
	_, err = js.UpdateStream(ctx, changed)
	require.NoError(t, err)
	out, err = streams("check")
	require.Error(t, err)
	assert.Contains(t, out, changed.Name+" differs in max age")
	out, err = streams("apply")
	require.NoError(t, err, out)
	s, err := js.Stream(ctx, changed.Name)
	require.NoError(t, err)
	assert.Equal(t, 14*24*time.Hour, s.CachedInfo().Config.MaxAge)

	out, err = streams("apply")
	require.NoError(t, err)
	assert.Contains(t, out, "nothing to change")

	// Outside a checkout (the stockflow-tools image), with NATS_URL.
	wd := t.TempDir()
	t.Chdir(wd)
	out, err = streams("check")
	require.NoError(t, err, out)

	_, err = streams("apply", "-replicas", "7")
	assert.ErrorContains(t, err, "between 1 and 5")
	env["NATS_STREAM_REPLICAS"] = "x"
	_, err = streams("check")
	assert.ErrorContains(t, err, "NATS_STREAM_REPLICAS")
}
