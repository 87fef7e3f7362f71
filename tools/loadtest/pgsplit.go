package loadtest

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
)

// pgProc is one PostgreSQL process at one moment: what it serves and its CPU time.
type pgProc struct {
	group string // a client backend's database, else the process's backend type
	start int64  // starttime, to tell a reused pid apart
	ticks int64  // utime+stime
}

// PGShare is the CPU time of the PostgreSQL processes of one kind over the window: the client
// backends of one database, or one kind of background process (walwriter, autovacuum
// worker…).
type PGShare struct {
	Group string
	Ms    float64
}

// pgSample reads the CPU time of every process pg_stat_activity lists on the server of
// databaseURL, from /proc: so only for a server on this machine.
func pgSample(ctx context.Context, databaseURL string) (map[int]pgProc, error) {
	if databaseURL == "" {
		return nil, errors.New("no database URL")
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `
		SELECT pid, CASE WHEN backend_type = 'client backend' THEN coalesce(datname, '?') ELSE backend_type END
		  FROM pg_stat_activity`)
	if err != nil {
		return nil, err
	}
	type listed struct {
		pid   int
		group string
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (listed, error) {
		var l listed
		return l, r.Scan(&l.pid, &l.group)
	})
	if err != nil {
		return nil, err
	}
	out := make(map[int]pgProc, len(all))
	var readErr error
	for _, l := range all {
		s, err := readStat(l.pid)
		if err != nil {
			readErr = err // exited since it was listed, or not on this machine
			continue
		}
		out[l.pid] = pgProc{group: l.group, start: s.start, ticks: s.utime + s.stime}
	}
	if len(out) == 0 && readErr != nil {
		return nil, readErr
	}
	return out, nil
}

// pgShares is each group's CPU time between two samples, largest first: a process in both
// counts what it used between them, one that started since counts all it used. The time of
// processes that ended within the window (connections closed, autovacuum workers done) is in
// no group; it is what PostgreSQL's total has beyond their sum.
func pgShares(before, after map[int]pgProc) []PGShare {
	ticks := map[string]int64{}
	for pid, a := range after {
		d := a.ticks
		if b, ok := before[pid]; ok && b.start == a.start {
			d -= b.ticks
		}
		ticks[a.group] += d
	}
	out := make([]PGShare, 0, len(ticks))
	for g, t := range ticks {
		out = append(out, PGShare{Group: g, Ms: ticksToMs(t)})
	}
	slices.SortFunc(out, func(a, b PGShare) int {
		return cmp.Or(cmp.Compare(b.Ms, a.Ms), cmp.Compare(a.Group, b.Group))
	})
	return out
}
