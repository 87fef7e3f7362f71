// Package redistest starts a private redis-server for a test — one the test may stop and
// start again (a Redis outage mid-sale) without touching the machine's shared Redis.
package redistest

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stockflow/stockflow/pkg/freeport"
)

// Server is a redis-server child process on its own port, keeping nothing on disk.
type Server struct {
	t    testing.TB
	Port int
	URL  string // redis://127.0.0.1:<port>/0
	cmd  *exec.Cmd
}

// Start starts a redis-server for t on a free port and stops it when t ends. It fails t when
// redis-server is not installed (Debian: apt-get install redis-server).
func Start(t testing.TB) *Server {
	t.Helper()
	// Below the ephemeral range: a restart (Restart) binds it again, and a client's connect
	// could otherwise have taken it meanwhile.
	port, err := freeport.Port()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s := &Server{t: t, Port: port, URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Stop kills the server (its data is gone, as after a crash of a Redis without persistence).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port, empty, and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		s.t.Fatalf("redistest: redis-server is not installed (apt-get install redis-server): %v", err)
	}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: redis-server on %d did not come up: %v", s.Port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
