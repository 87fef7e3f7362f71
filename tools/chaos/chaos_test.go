package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/tools/chaos"
)

// TestChaosShortForm is `make chaos` in `make test`: a minute's flash sale on a stockflow of
// its own while every kind of fault fires at least once, then every check of the report. A
// failing run keeps its logs (the path is printed) and can be repeated with its seed:
// `make chaos SEED=<seed>`.
func TestChaosShortForm(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	runDir, err := os.MkdirTemp("", "stockflow-chaos-")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, chaos.Config{Root: root, RunDir: runDir, Progress: testWriter{t}})
	require.NotNil(t, rep, "%v", err)
	t.Logf("%s", rep)
	for _, c := range rep.Checks {
		assert.True(t, c.Pass, "%s: %s", c.Name, c.Detail)
	}
	for _, k := range chaos.Kinds {
		assert.Positive(t, rep.Injected[k], "fault kind %q never injected", k)
	}
	if err != nil || t.Failed() {
		t.Logf("logs kept in %s/logs; repeat with make chaos SEED=%d", runDir, rep.Seed)
		t.Fail()
		return
	}
	_ = os.RemoveAll(runDir)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
