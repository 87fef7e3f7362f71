package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/stockflow/stockflow/pkg/natsx"
)

// The launcher's nats-server is locked down (natsx.PermissionsOf): RunDir/nats holds its
// configuration (nats.conf, rendered on every up), the passwords of its users (passwords.json,
// made once and kept for the next up; `down -purge` removes them with the store) and its
// JetStream store. Both files are 0600.
func (o Options) natsDir() string { return o.path("nats") }

func (o Options) natsPasswordsFile() string { return filepath.Join(o.natsDir(), "passwords.json") }

// NATSBinary builds the nats-server pinned in pkg/go.mod into RunDir/bin (once).
func NATSBinary(ctx context.Context, o Options) (string, error) {
	bin := o.path("bin", "nats-server")
	mod, _ := os.Stat(filepath.Join(o.Root, "pkg", "go.mod"))
	if st, err := os.Stat(bin); err == nil && (mod == nil || st.ModTime().After(mod.ModTime())) {
		return bin, nil
	}
	o.Log("building the pinned nats-server")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	cmd.Dir = filepath.Join(o.Root, "pkg")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build nats-server: %w\n%s", err, out)
	}
	return bin, nil
}

// ensureNATS returns the admin's URL of a NATS whose streams are ensured. An external NATS
// (o.NATSURL) is used as given, by the services too: its users, if any, are its operator's
// business, and its URL must be allowed to manage streams. Otherwise it starts the pinned
// nats-server locked down (or finds the one an earlier up started) and returns its URL with
// the admin's credentials; each service gets its own (serviceNATSURL).
func ensureNATS(ctx context.Context, o Options) (string, error) {
	if o.NATSURL != "" {
		return o.NATSURL, ensureStreams(ctx, o, o.NATSURL)
	}
	port := o.NATSPort
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return "", err
		}
	}
	plain := fmt.Sprintf("nats://127.0.0.1:%d", port)
	passwords, err := natsPasswords(o)
	if err != nil {
		return "", err
	}
	adminURL, err := natsx.WithCredentials(plain, natsx.AdminUser, passwords[natsx.AdminUser])
	if err != nil {
		return "", err
	}
	if pid := readPid(o.path("pids", "nats.pid")); pid > 0 && Alive(pid) {
		// Ours, from an earlier up: it must be the locked-down server of these passwords.
		if err := checkLocked(ctx, adminURL); err != nil {
			return "", fmt.Errorf("nats-server (pid %d) from an earlier up: %w; run `make down` and `make up` again", pid, err)
		}
		return adminURL, ensureStreams(ctx, o, adminURL)
	}
	if portFree(fmt.Sprintf("127.0.0.1:%d", port), 0) != nil {
		return "", fmt.Errorf("port %d is taken by another server (another checkout's `make up`? run `make down` there, or set STOCKFLOW_PORT_OFFSET)", port)
	}
	conf, err := writeNATSConfig(o, port, passwords)
	if err != nil {
		return "", err
	}
	bin, err := NATSBinary(ctx, o)
	if err != nil {
		return "", err
	}
	if _, err := spawn(o, "nats", exec.Command(bin, "-c", conf)); err != nil {
		return "", err
	}
	for range 100 {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			return adminURL, ensureStreams(ctx, o, adminURL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("nats-server did not start; see %s", o.path("logs", "nats.log"))
}

// natsPasswords reads RunDir/nats/passwords.json, first making it with a random password for
// each of natsx.Users (and adding any user the table gained since).
func natsPasswords(o Options) (map[string]string, error) {
	pw, err := readNATSPasswords(o)
	if errors.Is(err, os.ErrNotExist) {
		pw, err = map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	fresh, err := natsx.NewPasswords()
	if err != nil {
		return nil, err
	}
	missing := false
	for _, u := range natsx.Users() {
		if pw[u] == "" {
			pw[u], missing = fresh[u], true
		}
	}
	if !missing {
		return pw, nil
	}
	if err := os.MkdirAll(o.natsDir(), 0o700); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(pw, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(o.natsPasswordsFile(), append(out, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("nats passwords: %w", err)
	}
	return pw, nil
}

// readNATSPasswords reads RunDir/nats/passwords.json.
func readNATSPasswords(o Options) (map[string]string, error) {
	b, err := os.ReadFile(o.natsPasswordsFile())
	if err != nil {
		return nil, err
	}
	pw := map[string]string{}
	if err := json.Unmarshal(b, &pw); err != nil {
		return nil, fmt.Errorf("nats passwords %s: %w", o.natsPasswordsFile(), err)
	}
	return pw, nil
}

// writeNATSConfig writes RunDir/nats/nats.conf: the server listens on 127.0.0.1:port only,
// runs JetStream in RunDir/nats and knows the users of natsx.AuthorizationConfig. With one
// replica, a message acknowledged to the relay must be on disk before the ack (sync_interval:
// always; the default syncs every 2 minutes, and an OS crash would lose what the outbox already
// marked published: review F6).
func writeNATSConfig(o Options, port int, passwords map[string]string) (string, error) {
	auth, err := natsx.AuthorizationConfig(passwords)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteString("# Written by tools/launcher on every up from pkg/natsx/permissions.go; edits are lost.\n")
	fmt.Fprintf(&b, "server_name: %s\nlisten: %s\n", natsx.ConfString("stockflow"), natsx.ConfString(fmt.Sprintf("127.0.0.1:%d", port)))
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %s\n  sync_interval: always\n}\n", natsx.ConfString(o.natsDir()))
	b.WriteString(auth)
	if err := os.MkdirAll(o.natsDir(), 0o700); err != nil {
		return "", err
	}
	conf := filepath.Join(o.natsDir(), "nats.conf")
	if err := os.WriteFile(conf, b.Bytes(), 0o600); err != nil {
		return "", err
	}
	return conf, os.Chmod(conf, 0o600) // WriteFile keeps an older file's mode
}

// checkLocked says why the server at adminURL is not the locked-down server of these
// credentials: it refuses them, or it requires no authentication at all (started by a
// launcher from before the lockdown).
func checkLocked(ctx context.Context, adminURL string) error {
	nc, _, err := natsx.Connect(ctx, adminURL, "stockflow-launcher")
	if err != nil {
		return fmt.Errorf("it refuses this RunDir's admin credentials: %w", err)
	}
	defer nc.Close()
	if !nc.AuthRequired() {
		return errors.New("it runs without authentication")
	}
	return nil
}

// ensureStreams creates the missing streams as the admin, before any service starts (a
// service user may only check them), and says which existing ones differ from this build's
// configuration: up never changes them; `stockflow streams apply` does.
func ensureStreams(ctx context.Context, o Options, url string) error {
	nc, js, err := natsx.Connect(ctx, url, "stockflow-launcher")
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	drifts, err := natsx.CreateStreams(ctx, js, localReplicas)
	for _, d := range drifts {
		o.Log("nats: stream %s (left as it is; `go run ./tools/cmd/stockflow streams apply` changes it)", d)
	}
	if err != nil {
		return fmt.Errorf("nats streams (the NATS URL's user must be allowed to manage them): %w", err)
	}
	return nil
}

// localReplicas is the stream replicas of the launcher's single nats-server.
const localReplicas = 1

// NATSAdminURL is the URL, with the admin's credentials, of the NATS that up uses: o.NATSURL
// when set, else the launcher's nats-server on o.NATSPort (its passwords from an earlier up).
func NATSAdminURL(o Options) (string, error) {
	if o.NATSURL != "" {
		return o.NATSURL, nil
	}
	pw, err := readNATSPasswords(o)
	if err != nil {
		return "", fmt.Errorf("the NATS admin's password (is stockflow up? set NATS_URL for another server): %w", err)
	}
	return natsx.WithCredentials(fmt.Sprintf("nats://127.0.0.1:%d", o.NATSPort), natsx.AdminUser, pw[natsx.AdminUser])
}

// serviceNATSURL is the NATS_URL svc starts with: the launcher's nats-server with svc's own
// user and password, never the admin's; an external NATS as given. When the passwords cannot be
// read it names the user without a password, so the service fails on an authorization error
// (its log says so) rather than running with anyone else's rights.
func (s *System) serviceNATSURL(svc string) string {
	if s.opts.NATSURL != "" {
		return s.NATSURL
	}
	pw, err := readNATSPasswords(s.opts)
	if err != nil {
		s.opts.Log("nats credentials of %s: %v", svc, err)
	}
	u, err := natsx.WithCredentials(s.NATSURL, svc, pw[svc])
	if err != nil {
		s.opts.Log("nats url of %s: %v", svc, err)
		return ""
	}
	return u
}
