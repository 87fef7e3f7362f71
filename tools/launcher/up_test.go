package launcher

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// An up that fails after it has started nats-server (here: Redis's port is someone else's)
// stops it again instead of leaving it running for the next test or user to trip over.
func TestUpThatFailsStopsWhatItStarted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the pinned nats-server")
	}
	o, natsPort := natsRunDir(t)
	o.DatabaseURL = pgtest.ServerURL()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	o.RedisPort = taken.Addr().(*net.TCPAddr).Port

	_, err = Up(context.Background(), o)
	require.ErrorContains(t, err, "port "+strconv.Itoa(o.RedisPort)+" is taken")
	assert.NoError(t, portFree("127.0.0.1:"+strconv.Itoa(natsPort), 0), "nats-server still listens after the failed up")
	_, statErr := os.Stat(o.path("pids", "nats.pid"))
	assert.ErrorIs(t, statErr, os.ErrNotExist, "its pid file stays behind")
}
