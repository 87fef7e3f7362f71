package natstest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/stockflow/stockflow/pkg/natsx"
)

// Locked is an embedded server locked down as the launcher's nats-server is: its users and
// permissions come from the configuration natsx.AuthorizationConfig renders, through the
// server's own configuration parser.
type Locked struct {
	// URL is the server's nats:// URL without credentials.
	URL       string
	passwords map[string]string
}

// As is the server's URL with user's credentials (natsx.AdminUser or a service).
func (l Locked) As(user string) string {
	u, err := natsx.WithCredentials(l.URL, user, l.passwords[user])
	if err != nil {
		panic(err) // URL came from the server
	}
	return u
}

// Password is user's password.
func (l Locked) Password(user string) string { return l.passwords[user] }

// StartLocked is Start with authentication and natsx.PermissionsOf for every user, fresh random
// passwords, and the streams not yet created (connect as natsx.AdminUser to ensure them).
func StartLocked(t testing.TB) Locked {
	t.Helper()
	passwords, err := natsx.NewPasswords()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	auth, err := natsx.AuthorizationConfig(passwords)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(auth), 0o600); err != nil {
		t.Fatalf("natstest: %v", err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("natstest: parse rendered configuration: %v", err)
	}
	opts.ServerName = "natstest-locked"
	return Locked{URL: run(t, opts), passwords: passwords}
}
