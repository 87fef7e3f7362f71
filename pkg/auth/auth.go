// Package auth is who may call what: bearer JWTs verified against a JWKS, the roles they carry,
// and the per-route check every service puts in front of its endpoints.
//
// A token's claims are its subject (who acts: written as the operator of every ledger row,
// adjustment and reconcile run), its roles, and for buyers the buyer id. Each service verifies
// tokens itself against the keys it is configured with (AUTH_JWKS: a JWKS file or URL); the
// gateway only forwards the bearer. Tokens signed by a service's own key (key id
// "service:<name>") may carry the service role and nothing else, and every other key may not
// carry it: a service that leaks its key cannot mint an admin, and a person cannot pose as a
// service.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/stockflow/stockflow/pkg/httpx"
)

// Role is what a token allows.
type Role string

// The roles. A route names the roles it admits; no role implies another.
const (
	Buyer    Role = "buyer"    // own orders: create, read, cancel
	Viewer   Role = "viewer"   // read stock, ledgers, orders, payments, deadlines, reconcile runs
	Operator Role = "operator" // purchases, receipts, adjustments, stocktakes, slots, prices, reconcile check
	Approver Role = "approver" // approve or reject adjustments and stocktakes (never one's own)
	Admin    Role = "admin"    // rebuild, reconcile repair, and everything an operator may do
	Service  Role = "service"  // the internal endpoints between services
)

// Roles lists every role, for validation.
var Roles = []Role{Buyer, Viewer, Operator, Approver, Admin, Service}

// Readers are the roles that may read the shop's books.
var Readers = []Role{Viewer, Operator, Approver, Admin, Service}

// ServiceKeyPrefix starts the key id of a service's own signing key: "service:stock".
const ServiceKeyPrefix = "service:"

// Claims are a verified token's claims.
type Claims struct {
	Roles   []Role `json:"roles"`
	BuyerID string `json:"buyer_id,omitempty"`
	jwt.RegisteredClaims
}

// clone is a copy of c that shares nothing with it.
func (c Claims) clone() *Claims {
	c.Roles, c.Audience = slices.Clone(c.Roles), slices.Clone(c.Audience)
	for _, d := range []**jwt.NumericDate{&c.ExpiresAt, &c.NotBefore, &c.IssuedAt} {
		if *d != nil {
			copied := **d
			*d = &copied
		}
	}
	return &c
}

// Has says whether the claims carry one of roles.
func (c *Claims) Has(roles ...Role) bool {
	if c == nil {
		return false
	}
	for _, r := range roles {
		if slices.Contains(c.Roles, r) {
			return true
		}
	}
	return false
}

// The codes of the identity check, the same on every route of every service.
var (
	CodeUnauthenticated = httpx.NewCode(http.StatusUnauthorized, "unauthenticated")
	CodeInvalidToken    = httpx.NewCode(http.StatusUnauthorized, "invalid_token")
	CodeForbidden       = httpx.NewCode(http.StatusForbidden, "forbidden")
)

// ErrUnauthenticated is the answer to a request without a bearer token.
var ErrUnauthenticated = CodeUnauthenticated.Errorf("a valid bearer token is required")

// Forbidden is the 403 of a token whose roles do not allow the request, saying why.
func Forbidden(format string, args ...any) *httpx.Error {
	return CodeForbidden.Errorf(format, args...)
}

// Config says which tokens a service accepts.
type Config struct {
	JWKS     string // a JWKS file, or an http(s) URL served by the identity provider
	Issuer   string // the required iss
	Audience string // the required aud
	// Now is the clock tokens are checked against (nil: time.Now); tests move it.
	Now func() time.Time
}

// A verified token is remembered, so its caller's next request skips the signature check (an
// Ed25519 verify was a fifth of the order service's CPU at 700 orders/s, docs/performance.md).
// It is remembered until the token expires (with the leeway) and at most RememberFor: a key
// withdrawn from the JWKS stops admitting the tokens it signed within RememberFor. Only the
// exact token string is looked up; a refused token is never remembered. At most
// RememberTokens are kept; when full, an arbitrary half is forgotten.
const (
	RememberFor    = time.Minute
	RememberTokens = 1 << 14
)

// leeway is how far expiry and issue times may be off.
const leeway = 30 * time.Second

// Verifier checks bearer tokens.
type Verifier struct {
	keys   jwt.Keyfunc
	parser *jwt.Parser
	now    func() time.Time
	mu     sync.Mutex
	known  map[string]verified
}

// verified is a remembered token's claims and until when they stand.
type verified struct {
	claims Claims
	until  time.Time
}

// NewVerifier loads the keys of cfg.JWKS (a URL is refreshed in the background until ctx ends).
func NewVerifier(ctx context.Context, cfg Config) (*Verifier, error) {
	if cfg.JWKS == "" {
		return nil, errors.New("auth: no JWKS configured (AUTH_JWKS: a file or URL)")
	}
	var kf keyfunc.Keyfunc
	var err error
	if strings.HasPrefix(cfg.JWKS, "http://") || strings.HasPrefix(cfg.JWKS, "https://") {
		kf, err = keyfunc.NewDefaultCtx(ctx, []string{cfg.JWKS})
	} else {
		var raw []byte
		if raw, err = os.ReadFile(cfg.JWKS); err == nil {
			kf, err = keyfunc.NewJWKSetJSON(raw)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("auth: load JWKS %s: %w", cfg.JWKS, err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Verifier{
		keys: kf.Keyfunc,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{"EdDSA", "ES256", "RS256"}),
			jwt.WithIssuer(cfg.Issuer), jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(leeway), jwt.WithTimeFunc(now),
		),
		now:   now,
		known: map[string]verified{},
	}, nil
}

// Verify parses and checks a token: signature, issuer, audience, expiry, and the service-key
// rule of the package comment — or finds it verified before and still standing (RememberFor).
// Each call gets its own copy of the claims.
func (v *Verifier) Verify(token string) (*Claims, error) {
	now := v.now()
	v.mu.Lock()
	e, ok := v.known[token]
	v.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.claims.clone(), nil
	}
	c, err := v.verify(token)
	if err != nil {
		return nil, err
	}
	until := now.Add(RememberFor)
	if exp := c.ExpiresAt.Add(leeway); exp.Before(until) {
		until = exp
	}
	v.mu.Lock()
	if len(v.known) >= RememberTokens {
		n := 0
		for k := range v.known { // map order is random: an arbitrary half
			delete(v.known, k)
			if n++; n >= RememberTokens/2 {
				break
			}
		}
	}
	v.known[token] = verified{claims: *c.clone(), until: until}
	v.mu.Unlock()
	return c, nil
}

// verify checks a token in full.
func (v *Verifier) verify(token string) (*Claims, error) {
	var c Claims
	t, err := v.parser.ParseWithClaims(token, &c, v.keys)
	if err != nil {
		return nil, err
	}
	if c.Subject == "" || len(c.Roles) == 0 {
		return nil, errors.New("token has no subject or no roles")
	}
	kid, _ := t.Header["kid"].(string)
	if svc, ok := strings.CutPrefix(kid, ServiceKeyPrefix); ok {
		if len(c.Roles) != 1 || c.Roles[0] != Service || c.Subject != svc {
			return nil, fmt.Errorf("key %s may only sign service tokens for %s", kid, svc)
		}
	} else if c.Has(Service) {
		return nil, fmt.Errorf("key %q may not sign service tokens", kid)
	}
	for _, r := range c.Roles {
		if !slices.Contains(Roles, r) {
			return nil, fmt.Errorf("unknown role %q", r)
		}
	}
	if c.Has(Buyer) && c.BuyerID == "" {
		return nil, errors.New("a buyer token needs a buyer_id")
	}
	return &c, nil
}

type ctxKey struct{}

// FromContext returns the claims Require put in the request's context.
func FromContext(ctx context.Context) *Claims {
	c, _ := ctx.Value(ctxKey{}).(*Claims)
	return c
}

// WithClaims returns ctx carrying c (what Require does; tests of handlers below it use it).
func WithClaims(ctx context.Context, c *Claims) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// Require wraps h: the request needs a valid bearer token (else 401) carrying one of roles
// (else 403); h finds the claims with FromContext. Nothing of h runs when it is refused.
func (v *Verifier) Require(h http.Handler, roles ...Role) http.Handler {
	if len(roles) == 0 {
		panic("auth.Require without roles") // a route must say who may call it
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || raw == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="stockflow"`)
			httpx.WriteError(w, ErrUnauthenticated)
			return
		}
		c, err := v.Verify(strings.TrimSpace(raw))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="stockflow", error="invalid_token"`)
			httpx.WriteError(w, CodeInvalidToken.Errorf("%v", err))
			return
		}
		if !c.Has(roles...) {
			httpx.WriteError(w, Forbidden("this needs one of the roles %v; the token has %v", roles, c.Roles))
			return
		}
		h.ServeHTTP(w, r.WithContext(WithClaims(r.Context(), c)))
	})
}

// Actor is who acts for the request: the token's subject. Code below Require always has one.
func Actor(ctx context.Context) string {
	if c := FromContext(ctx); c != nil {
		return c.Subject
	}
	return ""
}
