package natstest

import (
	"errors"
	"net"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// A server given a port something else holds fails with errPortTaken and the server's own words
// (not by waiting out the readiness timeout, which fails otherwise); the cluster then starts
// the node on fresh ports.
func TestAServerWhosePortIsTakenFailsAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv, err := tryServe(&server.Options{ServerName: "taken", Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port, StoreDir: t.TempDir()})
	if err == nil {
		srv.Shutdown()
		t.Fatal("a server started on a port that was taken")
	}
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("err = %v, want errPortTaken", err)
	}
	t.Log(err)
}
