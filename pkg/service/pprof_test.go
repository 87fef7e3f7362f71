package service

import (
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPprofListensOnItsOwnLoopbackPort: PPROF_ADDR with port 0 takes a free port of its own
// and serves the profiler there; an address off the loopback interface is refused.
func TestPprofListensOnItsOwnLoopbackPort(t *testing.T) {
	srv, err := servePprof("127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	res, err := http.Get("http://" + srv.Addr + "/debug/pprof/cmdline")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.NotEmpty(t, body, "the process's command line")
	res, err = http.Get("http://" + srv.Addr + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	_ = res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)

	for addr, ok := range map[string]bool{"127.0.0.1:6060": true, "[::1]:0": true, "localhost:6060": true,
		"0.0.0.0:6060": false, ":6060": false, "10.0.0.5:6060": false, "127.0.0.1": false} {
		_, err := validated(t, "PPROF_ADDR", addr)
		if ok {
			assert.NoError(t, err, addr)
		} else {
			assert.ErrorContains(t, err, "PPROF_ADDR", addr)
		}
	}
}
