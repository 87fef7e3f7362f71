// Package natstest runs a real NATS server with JetStream inside the test process, so flow
// tests exercise the same server code (message schedules, deduplication, acks) as production
// without depending on whatever NATS happens to be installed on the machine.
package natstest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
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
	srv, err := tryServe(opts)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return srv
}

// errPortTaken is a server that could not listen on a port it was given: something took it.
var errPortTaken = errors.New("a port is taken")

// tryServe is serve without the test. A server that cannot start fails at once with its own
// words, which it reports through its logger only (wrapping errPortTaken when a port it was
// given is in use), instead of leaving the caller to wait out the readiness timeout.
func tryServe(opts *server.Options) (*server.Server, error) {
	opts.JetStream = true
	opts.NoLog, opts.NoSigs = true, true
	// Keep the footprint small: tests run several servers side by side on 2 cores.
	opts.JetStreamMaxMemory, opts.JetStreamMaxStore = 64<<20, 1<<30
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("create server %s: %w", opts.ServerName, err)
	}
	log := &fatalLog{}
	srv.SetLoggerV2(log, false, false, false)
	go srv.Start()
	for deadline := time.Now().Add(10 * time.Second); !srv.ReadyForConnections(50 * time.Millisecond); {
		if msg := log.first(); msg != "" {
			srv.Shutdown()
			err := fmt.Errorf("server %s could not start: %s", opts.ServerName, msg)
			if strings.Contains(msg, "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return nil, err
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			return nil, fmt.Errorf("server %s not ready within 10s", opts.ServerName)
		}
	}
	return srv, nil
}

// fatalLog keeps the first fatal message of a server (a listener that failed, say) and drops
// the rest of its log.
type fatalLog struct {
	mu  sync.Mutex
	msg string
}

func (l *fatalLog) Fatalf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.msg == "" {
		l.msg = fmt.Sprintf(format, v...)
	}
}

func (l *fatalLog) first() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msg
}

func (*fatalLog) Noticef(string, ...any) {}
func (*fatalLog) Warnf(string, ...any)   {}
func (*fatalLog) Errorf(string, ...any)  {}
func (*fatalLog) Debugf(string, ...any)  {}
func (*fatalLog) Tracef(string, ...any)  {}
