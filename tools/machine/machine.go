// Package machine describes the host a measurement ran on — CPU count and model, and the
// PostgreSQL settings that decide durable write speed — so every printed figure carries it.
package machine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Settings are the PostgreSQL settings printed with every result.
var Settings = []string{"server_version", "shared_buffers", "synchronous_commit", "fsync", "wal_level", "max_connections"}

// WriteHost prints nproc and the CPU model.
func WriteHost(w io.Writer) {
	fmt.Fprintf(w, "nproc: %d\ncpu: %s\n", runtime.NumCPU(), cpuModel())
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "unknown".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// WritePostgres prints Settings as the server at url reports them, one line.
func WritePostgres(ctx context.Context, w io.Writer, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("postgres settings: %w", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT name || '=' || current_setting(name) FROM unnest($1::text[]) WITH ORDINALITY AS s(name, i) ORDER BY i`, Settings)
	if err != nil {
		return fmt.Errorf("postgres settings: %w", err)
	}
	kv, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres settings: %w", err)
	}
	fmt.Fprintf(w, "postgres: %s\n", strings.Join(kv, " "))
	return nil
}
