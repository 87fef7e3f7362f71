// Package authtest gives tests a real key pair, a verifier of it and tokens signed with it:
// handlers under test check real signatures, not a bypass.
package authtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"

	"github.com/stockflow/stockflow/pkg/auth"
)

// Issuer and Audience of every test token.
const (
	Issuer   = "stockflow-test"
	Audience = "stockflow"
)

// Kit is a JWKS with an identity provider's key and one service key.
type Kit struct {
	Verifier *auth.Verifier
	JWKSFile string
	people   *auth.Signer
	services map[string]*auth.Signer
	t        testing.TB
}

// New writes a JWKS of a people key ("idp") and a key per named service to a temp dir.
func New(t testing.TB, services ...string) *Kit {
	t.Helper()
	dir := t.TempDir()
	k := &Kit{t: t, services: map[string]*auth.Signer{}}
	var pubs []jwkset.JWKMarshal
	add := func(kid string) *auth.Signer {
		priv, pub, err := auth.GenerateKey(kid)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, kid+".jwk")
		if err := os.WriteFile(file, priv, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := auth.LoadSigner(file, Issuer, Audience)
		if err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, pub)
		return s
	}
	k.people = add("idp")
	for _, svc := range services {
		k.services[svc] = add(auth.ServiceKeyPrefix + svc)
	}
	raw, err := auth.JWKS(pubs...)
	if err != nil {
		t.Fatal(err)
	}
	k.JWKSFile = filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(k.JWKSFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if k.Verifier, err = auth.NewVerifier(context.Background(), k.Config()); err != nil {
		t.Fatal(err)
	}
	return k
}

// Config is the auth configuration that accepts the kit's tokens.
func (k *Kit) Config() auth.Config {
	return auth.Config{JWKS: k.JWKSFile, Issuer: Issuer, Audience: Audience}
}

// Token is a bearer token for subject with roles; a buyer's buyer id is its subject.
func (k *Kit) Token(subject string, roles ...auth.Role) string {
	k.t.Helper()
	buyer := ""
	for _, r := range roles {
		if r == auth.Buyer {
			buyer = subject
		}
	}
	tok, err := k.people.Mint(subject, roles, buyer, time.Hour)
	if err != nil {
		k.t.Fatal(err)
	}
	return tok
}

// Bearer is the Authorization header value of Token.
func (k *Kit) Bearer(subject string, roles ...auth.Role) string {
	return "Bearer " + k.Token(subject, roles...)
}

// Service is the signer of a service named in New.
func (k *Kit) Service(name string) *auth.Signer { return k.services[name] }
