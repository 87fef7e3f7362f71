package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
)

func TestVerify(t *testing.T) {
	kit := authtest.New(t, "stock")
	other := authtest.New(t) // a key the verifier does not know
	mint := func(s *auth.Signer, sub string, roles []auth.Role, buyer string, ttl time.Duration) string {
		tok, err := s.Mint(sub, roles, buyer, ttl)
		require.NoError(t, err)
		return tok
	}
	cases := []struct {
		name  string
		token string
		ok    bool
	}{
		{"operator", kit.Token("alice", auth.Operator), true},
		{"buyer with buyer id", kit.Token("u1", auth.Buyer), true},
		{"service token from its own key", mint(kit.Service("stock"), "stock", []auth.Role{auth.Service}, "", time.Minute), true},
		{"forged: another key", other.Token("alice", auth.Admin), false},
		{"expired (beyond the 30 s leeway)", backdated(t, kit), false},
		{"garbage", "not.a.token", false},
		{"a person's key may not sign service", mint(signer(t, kit, "idp"), "stock", []auth.Role{auth.Service}, "", time.Minute), false},
		{"a service key may not sign admin", mint(kit.Service("stock"), "stock", []auth.Role{auth.Admin}, "", time.Minute), false},
		{"a service key signs only for its service", mint(kit.Service("stock"), "order", []auth.Role{auth.Service}, "", time.Minute), false},
		{"buyer without buyer id", mint(signer(t, kit, "idp"), "u1", []auth.Role{auth.Buyer}, "", time.Minute), false},
		{"unknown role", mint(signer(t, kit, "idp"), "u1", []auth.Role{"root"}, "", time.Minute), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := kit.Verifier.Verify(c.token)
			if c.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

// signer loads the kit's people key from its directory.
func signer(t *testing.T, kit *authtest.Kit, kid string) *auth.Signer {
	s, err := auth.LoadSigner(filepath.Join(filepath.Dir(kit.JWKSFile), kid+".jwk"), authtest.Issuer, authtest.Audience)
	require.NoError(t, err)
	return s
}

// backdated is a token that expired a minute ago: longer than the verifier's leeway.
func backdated(t *testing.T, kit *authtest.Kit) string {
	tok, err := signer(t, kit, "idp").MintAt("alice", []auth.Role{auth.Operator}, "", time.Now().Add(-2*time.Minute), time.Minute)
	require.NoError(t, err)
	return tok
}

func TestRequire(t *testing.T) {
	kit := authtest.New(t)
	ran := 0
	h := kit.Verifier.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		assert.Equal(t, "bob", auth.Actor(r.Context()))
	}), auth.Approver)
	for _, c := range []struct {
		name   string
		header string
		status int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"not a bearer", "Basic Ym9iOng=", http.StatusUnauthorized},
		{"forged", "Bearer " + authtest.New(t).Token("bob", auth.Approver), http.StatusUnauthorized},
		{"wrong role", kit.Bearer("bob", auth.Operator), http.StatusForbidden},
		{"right role", kit.Bearer("bob", auth.Approver), http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := ran
			req := httptest.NewRequest("POST", "/x", nil)
			if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			assert.Equal(t, c.status, w.Code, w.Body.String())
			if c.status == http.StatusOK {
				assert.Equal(t, before+1, ran)
			} else {
				assert.Equal(t, before, ran, "a refused request runs nothing")
				assert.Contains(t, w.Body.String(), `"error"`)
			}
		})
	}
}

// TestARememberedTokenStillExpires: a token verified once is not checked in full again, but
// it is refused once it expires (beyond the leeway) as if it had never been seen.
func TestARememberedTokenStillExpires(t *testing.T) {
	kit := authtest.New(t)
	now := time.Now()
	cfg := kit.Config()
	cfg.Now = func() time.Time { return now }
	v, err := auth.NewVerifier(context.Background(), cfg)
	require.NoError(t, err)
	tok, err := signer(t, kit, "idp").MintAt("alice", []auth.Role{auth.Operator}, "", now, 10*time.Second) // shorter than RememberFor
	require.NoError(t, err)

	c, err := v.Verify(tok)
	require.NoError(t, err)
	c.Roles[0] = auth.Admin // a caller that changes its claims changes no one else's
	now = now.Add(39 * time.Second)
	c, err = v.Verify(tok)
	require.NoError(t, err, "within the leeway")
	assert.Equal(t, []auth.Role{auth.Operator}, c.Roles)
	now = now.Add(2 * time.Second)
	_, err = v.Verify(tok)
	assert.ErrorContains(t, err, "expired")
}

// TestATamperedTokenIsNotTakenForARememberedOne: only the exact token verified is remembered.
func TestATamperedTokenIsNotTakenForARememberedOne(t *testing.T) {
	kit := authtest.New(t)
	tok := kit.Token("u1", auth.Buyer)
	_, err := kit.Verifier.Verify(tok)
	require.NoError(t, err)
	// A signature character changed inside the signature (the last one may only carry bits the
	// decoder drops, which leaves the same signature), one added, the claims changed.
	at, other := len(tok)-10, "A"
	if tok[at] == 'A' {
		other = "B"
	}
	for _, forged := range []string{tok[:at] + other + tok[at+1:], tok + "A", strings.Replace(tok, ".", ".e", 1)} {
		_, err := kit.Verifier.Verify(forged)
		assert.Error(t, err, forged)
	}
	_, err = kit.Verifier.Verify(tok)
	assert.NoError(t, err)
}

// BenchmarkVerify: a token seen for the first time (the signature checked) and one verified
// before (remembered).
func BenchmarkVerify(b *testing.B) {
	kit := authtest.New(b)
	b.Run("first", func(b *testing.B) {
		toks := make([]string, b.N)
		for i := range toks {
			toks[i] = kit.Token(fmt.Sprintf("u%d", i), auth.Buyer)
		}
		b.ResetTimer()
		for i := range b.N {
			if _, err := kit.Verifier.Verify(toks[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		tok := kit.Token("u1", auth.Buyer)
		for b.Loop() {
			if _, err := kit.Verifier.Verify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}
