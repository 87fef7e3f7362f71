// Package natstest runs a real NATS server with JetStream inside the test process, so flow
// tests exercise the same server code (message schedules, deduplication, acks) as production
// without depending on whatever NATS happens to be installed on the machine.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs an embedded nats-server (the version pinned in pkg/go.mod) with JetStream on a
// random local port, storing its data under t.TempDir(), and returns its nats:// URL. Each call
// is a fresh, empty server: streams created by one test are never seen by another. The server
// is shut down when the test ends.
func Start(t testing.TB) string {
	t.Helper()
	return run(t, &server.Options{ServerName: "natstest"})
}

// StartSyncAlways is Start with sync_interval: always, as every configuration the project
// ships sets it: each stored message is fsynced before its ack (Start syncs every 2 minutes,
// nats-server's default, which tests do not need to pay for).
func StartSyncAlways(t testing.TB) string {
	t.Helper()
	return run(t, &server.Options{ServerName: "natstest", SyncAlways: true})
}

// run completes opts with a random local port and JetStream under t.TempDir(), and runs it
// until the test ends.
func run(t testing.TB, opts *server.Options) string {
	t.Helper()
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.StoreDir = t.TempDir()
	srv := serve(t, opts)
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv.ClientURL()
}

// serve completes opts with what every test server shares (JetStream, no logs or signals, a
// small footprint), starts it and waits until it accepts connections.
func serve(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	opts.JetStream = true
	opts.NoLog, opts.NoSigs = true, true
	// Keep the footprint small: tests run several servers side by side on 2 cores.
	opts.JetStreamMaxMemory, opts.JetStreamMaxStore = 64<<20, 1<<30
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: create server %s: %v", opts.ServerName, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatalf("natstest: server %s not ready within 10s", opts.ServerName)
	}
	return srv
}
