package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// GenerateKey makes an Ed25519 signing key with key id kid: the private JWK (keep it secret)
// and its public half (for the JWKS the services verify against).
func GenerateKey(kid string) (private []byte, public jwkset.JWKMarshal, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, public, err
	}
	meta := jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgEdDSA, USE: jwkset.UseSig}
	pj, err := jwkset.NewJWKFromKey(priv, jwkset.JWKOptions{Marshal: jwkset.JWKMarshalOptions{Private: true}, Metadata: meta})
	if err != nil {
		return nil, public, err
	}
	uj, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{Metadata: meta})
	if err != nil {
		return nil, public, err
	}
	private, err = json.Marshal(pj.Marshal())
	return private, uj.Marshal(), err
}

// JWKS renders public keys as a JWK Set document.
func JWKS(keys ...jwkset.JWKMarshal) ([]byte, error) {
	return json.MarshalIndent(jwkset.JWKSMarshal{Keys: keys}, "", "  ")
}

// Signer mints tokens with one private key.
type Signer struct {
	key      ed25519.PrivateKey
	kid      string
	issuer   string
	audience string
}

// LoadSigner reads a private Ed25519 JWK (as GenerateKey writes it) from file.
func LoadSigner(file, issuer, audience string) (*Signer, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("auth: signing key: %w", err)
	}
	j, err := jwkset.NewJWKFromRawJSON(raw, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
	if err != nil {
		return nil, fmt.Errorf("auth: signing key %s: %w", file, err)
	}
	key, ok := j.Key().(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("auth: signing key %s is not an Ed25519 private key", file)
	}
	return &Signer{key: key, kid: j.Marshal().KID, issuer: issuer, audience: audience}, nil
}

// Mint signs a token for subject with roles (and buyerID, for a buyer) valid for ttl.
func (s *Signer) Mint(subject string, roles []Role, buyerID string, ttl time.Duration) (string, error) {
	return s.MintAt(subject, roles, buyerID, time.Now(), ttl)
}

// MintAt is Mint for a token issued at now (tests of expiry).
func (s *Signer) MintAt(subject string, roles []Role, buyerID string, now time.Time, ttl time.Duration) (string, error) {
	if subject == "" || len(roles) == 0 || ttl <= 0 {
		return "", errors.New("auth: a token needs a subject, a role and a lifetime")
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, Claims{
		Roles: roles, BuyerID: buyerID,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject: subject, Issuer: s.issuer, Audience: jwt.ClaimStrings{s.audience},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	})
	t.Header["kid"] = s.kid
	return t.SignedString(s.key)
}

// ServiceName is the service a service key signs for ("service:stock" → "stock"), or "".
func (s *Signer) ServiceName() string {
	name, _ := strings.CutPrefix(s.kid, ServiceKeyPrefix)
	if name == s.kid {
		return ""
	}
	return name
}

// Client is an HTTP client whose requests carry a service token of the signer's service,
// minted for five minutes and renewed a minute before it ends.
func (s *Signer) Client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &serviceTransport{signer: s, base: http.DefaultTransport}}
}

type serviceTransport struct {
	signer *Signer
	base   http.RoundTripper
	mu     sync.Mutex
	token  string
	until  time.Time
}

func (t *serviceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	if time.Now().After(t.until) {
		tok, err := t.signer.Mint(t.signer.ServiceName(), []Role{Service}, "", 5*time.Minute)
		if err != nil {
			t.mu.Unlock()
			return nil, err
		}
		t.token, t.until = tok, time.Now().Add(4*time.Minute)
	}
	tok := t.token
	t.mu.Unlock()
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(r)
}
