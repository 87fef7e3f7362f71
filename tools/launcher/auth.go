package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/MicahParks/jwkset"

	"github.com/stockflow/stockflow/pkg/auth"
)

// Issuer and Audience of the tokens a local system accepts.
const (
	Issuer   = "stockflow-local"
	Audience = "stockflow"
)

// The local identity provider: RunDir/auth holds its signing key (idp.jwk: what `stockflow
// token` signs with), one signing key per service (service-<name>.jwk, handed to that service
// only, for the service tokens of its calls to the others), and jwks.json, the public keys every
// service verifies against. Made once, kept across ups; `stockflow down -purge` keeps them too.
func (o Options) authDir() string { return o.path("auth") }

// EnsureKeys makes the local identity provider's keys unless they exist.
func EnsureKeys(o Options) error {
	o.defaults()
	dir := o.authDir()
	if _, err := os.Stat(filepath.Join(dir, "jwks.json")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var pubs []jwkset.JWKMarshal
	write := func(file, kid string) error {
		priv, pub, err := auth.GenerateKey(kid)
		if err != nil {
			return err
		}
		pubs = append(pubs, pub)
		return os.WriteFile(filepath.Join(dir, file), priv, 0o600)
	}
	if err := write("idp.jwk", "local-idp"); err != nil {
		return err
	}
	for _, svc := range Services {
		if err := write("service-"+svc+".jwk", auth.ServiceKeyPrefix+svc); err != nil {
			return err
		}
	}
	raw, err := auth.JWKS(pubs...)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "jwks.json"), raw, 0o644)
}

// authEnv is the token configuration of one service.
func (o Options) authEnv(svc string) []string {
	return []string{
		"AUTH_JWKS=" + filepath.Join(o.authDir(), "jwks.json"),
		"AUTH_ISSUER=" + Issuer, "AUTH_AUDIENCE=" + Audience,
		"AUTH_SERVICE_KEY=" + filepath.Join(o.authDir(), "service-"+svc+".jwk"),
	}
}

// Signer is the local identity provider's signer: `stockflow token`, the demo and the tests
// mint people's tokens with it.
func Signer(o Options) (*auth.Signer, error) {
	o.defaults()
	s, err := auth.LoadSigner(filepath.Join(o.authDir(), "idp.jwk"), Issuer, Audience)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no local identity provider in %s: run `make up` first", o.authDir())
	}
	return s, err
}

// Token mints a local token for subject with roles; a buyer's buyer id is its subject.
func Token(o Options, subject string, roles []auth.Role, ttl time.Duration) (string, error) {
	s, err := Signer(o)
	if err != nil {
		return "", err
	}
	buyer := ""
	for _, r := range roles {
		if r == auth.Buyer {
			buyer = subject
		}
	}
	return s.Mint(subject, roles, buyer, ttl)
}

// Token mints a one-hour token from the system's local identity provider.
func (s *System) Token(subject string, roles ...auth.Role) (string, error) {
	return Token(s.opts, subject, roles, time.Hour)
}

// Signer is the system's local identity provider.
func (s *System) Signer() (*auth.Signer, error) { return Signer(s.opts) }

// ServiceToken mints a five-minute service token as svc would for its calls to the others.
func (s *System) ServiceToken(svc string) (string, error) {
	signer, err := auth.LoadSigner(filepath.Join(s.opts.authDir(), "service-"+svc+".jwk"), Issuer, Audience)
	if err != nil {
		return "", err
	}
	return signer.Mint(svc, []auth.Role{auth.Service}, "", 5*time.Minute)
}
