// Package pgtest gives every test its own freshly migrated database on the real PostgreSQL
// server named by DATABASE_URL: migrations run once per schema into a template database, and
// each test clones the template (fast) and drops its clone when it ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	neturl "net/url"
	"os"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres"
)

// ServerURL is the server the tests use: DATABASE_URL, or the local default.
func ServerURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return postgres.DefaultURL
}

// New creates a database migrated with schemas for this test and returns a pool on it and its URL.
// The database is dropped when the test ends.
func New(t testing.TB, schemas ...postgres.Schema) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, ServerURL())
	require.NoError(t, err, "connect to PostgreSQL at %s (set DATABASE_URL)", ServerURL())
	defer admin.Close(ctx)

	tmpl, err := template(ctx, admin, schemas)
	require.NoError(t, err)

	name := "t_" + randomHex(8)
	_, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl))
	require.NoError(t, err, "clone template %s", tmpl)
	url := withDatabase(t, ServerURL(), name)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), ServerURL())
		if err != nil {
			t.Logf("drop %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	pool, err := postgres.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, url
}

// template returns the name of a template database holding the schema of fsys, creating it
// under an advisory lock so parallel test binaries build it once.
func template(ctx context.Context, admin *pgx.Conn, schemas []postgres.Schema) (string, error) {
	sum, err := hashSchemas(schemas)
	if err != nil {
		return "", err
	}
	name := "tmpl_" + sum[:16]
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(727001)"); err != nil {
		return "", fmt.Errorf("lock templates: %w", err)
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(727001)") //nolint:errcheck // the session ends with the test anyway

	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return name, nil
	}
	building := name + "_building"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop stale template: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	url, err := postgres.WithDatabase(ServerURL(), building)
	if err != nil {
		return "", err
	}
	pool, err := postgres.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	err = postgres.Migrate(ctx, pool, schemas...)
	pool.Close()
	if err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, name)); err != nil {
		return "", fmt.Errorf("publish template: %w", err)
	}
	return name, nil
}

func hashSchemas(schemas []postgres.Schema) (string, error) {
	h := sha256.New()
	for _, s := range schemas {
		fmt.Fprintf(h, "schema %s\x00", s.Name)
		if err := hashFS(h, s.FS); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFS(h io.Writer, fsys fs.FS) error {
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		_, err = h.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("hash migrations: %w", err)
	}
	return nil
}

func withDatabase(t testing.TB, url, name string) string {
	u, err := postgres.WithDatabase(url, name)
	require.NoError(t, err)
	return u
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Proxied puts a toxiproxy between the test and the database at url and returns the proxy
// (stop it, or add toxics, to make the network fail) and url through it. The proxy stops when
// t ends.
func Proxied(t testing.TB, url string) (*toxiproxy.Proxy, string) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	proxy := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		"postgres", "127.0.0.1:0", u.Host)
	if err := proxy.Start(); err != nil {
		t.Fatalf("pgtest: start proxy: %v", err)
	}
	t.Cleanup(proxy.Stop)
	u.Host = proxy.Listen
	return proxy, u.String()
}
