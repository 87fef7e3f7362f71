// Package deadletter is what an operator does with the messages a service's consumers gave up
// on (decision 0006): list the dead letters of the service's own consumers, show one, and
// replay it by running the consumer's own handler on the original message, in the service's
// process. The handler claims the message in the inbox as any delivery does, so a replay of a
// message whose effect is already applied changes nothing; each replay and its outcome is kept
// in the deadletter_replay table, so the list shows what is still to act on. pkg/service mounts
// the admin API (Mount) in every service.
package deadletter

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/postgres"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema creates the deadletter_replay table; pkg/service migrates it into every database.
var Schema = postgres.MigrationsSchema("deadletter", migrations)

// Errors of the admin operations, each mapped once in errs (httpapi.go).
var (
	// ErrOtherConsumer: the dead letter, or the consumer asked for, is not one of this
	// service's consumers: another service lists and replays it.
	ErrOtherConsumer = errors.New("not a consumer of this service")
	// ErrReplayFailed: the handler failed again; the dead letter stays pending.
	ErrReplayFailed = errors.New("replay failed")
)

// Outcomes of a replay, as stored.
const (
	OutcomeDone   = "done"   // the handler returned nil: applied now, or found already applied
	OutcomeFailed = "failed" // the handler returned an error
)

// States a list selects.
const (
	StatePending  = "pending"  // no replay of it has succeeded
	StateReplayed = "replayed" // a replay of it has succeeded
	StateAll      = "all"
)

// Admin lists, shows and replays the dead letters of one service's consumers.
type Admin struct {
	pool     *pgxpool.Pool
	js       jetstream.JetStream
	handlers map[string]natsx.Handler
	log      *slog.Logger
}

// New returns the Admin of the consumers in handlers (durable name → the handler Consume
// runs), reading DEADLETTER through js and keeping replays in pool's deadletter_replay.
func New(pool *pgxpool.Pool, js jetstream.JetStream, handlers map[string]natsx.Handler, log *slog.Logger) *Admin {
	if log == nil {
		log = slog.Default()
	}
	return &Admin{pool: pool, js: js, handlers: handlers, log: log}
}

// Consumers are the durable names the Admin answers for, sorted.
func (a *Admin) Consumers() []string {
	names := make([]string, 0, len(a.handlers))
	for n := range a.handlers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Replay is one stored replay of a dead letter.
type Replay struct {
	At      time.Time
	By      string
	Outcome string
	Error   string
}

// Entry is a dead letter with its replays, oldest first.
type Entry struct {
	natsx.DeadLetter
	Replays []Replay
}

// Replayed reports whether a replay of e succeeded.
func (e Entry) Replayed() bool {
	return slices.ContainsFunc(e.Replays, func(r Replay) bool { return r.Outcome == OutcomeDone })
}

// Query selects the dead letters List returns.
type Query struct {
	Consumer string // one of Consumers; empty: all of them
	Subject  string // the original subject; empty: any
	State    string // StatePending (the default), StateReplayed or StateAll
	Limit    int    // at most this many, newest first
}

// Listing is List's answer.
type Listing struct {
	Entries   []Entry // newest first
	Scanned   int     // DEADLETTER messages read
	Truncated bool    // DEADLETTER holds more than natsx.MaxDeadLetterScan: older ones were not read
}

// List returns the newest dead letters of the service's consumers that q selects. A q.Consumer
// the service does not run is ErrOtherConsumer.
func (a *Admin) List(ctx context.Context, q Query) (Listing, error) {
	consumers := a.Consumers()
	if q.Consumer != "" {
		if _, ok := a.handlers[q.Consumer]; !ok {
			return Listing{}, fmt.Errorf("list dead letters of %s: %w; it runs %v", q.Consumer, ErrOtherConsumer, consumers)
		}
		consumers = []string{q.Consumer}
	}
	var out Listing
	if len(consumers) == 0 {
		return out, nil
	}
	l, err := natsx.ListDeadLetters(ctx, a.js, natsx.DeadLetterFilter{Consumers: consumers, Subject: q.Subject})
	if err != nil {
		return out, err
	}
	out.Scanned, out.Truncated = l.Scanned, l.Truncated
	entries, err := a.withReplays(ctx, l.DeadLetters)
	if err != nil {
		return out, err
	}
	for i := len(entries) - 1; i >= 0 && (q.Limit <= 0 || len(out.Entries) < q.Limit); i-- {
		e := entries[i]
		switch {
		case q.State == StateAll,
			q.State == StateReplayed && e.Replayed(),
			(q.State == StatePending || q.State == "") && !e.Replayed():
			out.Entries = append(out.Entries, e)
		}
	}
	return out, nil
}

// Show returns dead letter seq with its body and replays: natsx.ErrDeadLetterNotFound when
// DEADLETTER does not hold it, ErrOtherConsumer when another service's consumer wrote it.
func (a *Admin) Show(ctx context.Context, seq uint64) (Entry, error) {
	dl, err := natsx.GetDeadLetter(ctx, a.js, seq)
	if err != nil {
		return Entry{}, err
	}
	if _, ok := a.handlers[dl.Consumer]; !ok {
		return Entry{}, fmt.Errorf("dead letter %d is %s's: %w", seq, consumerName(dl), ErrOtherConsumer)
	}
	entries, err := a.withReplays(ctx, []natsx.DeadLetter{dl})
	if err != nil {
		return Entry{}, err
	}
	return entries[0], nil
}

// ReplayResult is what one replay did.
type ReplayResult struct {
	Entry Entry // the dead letter, with every replay including this one
	// AlreadyReplayed says an earlier replay had succeeded: the inbox made this one change
	// nothing (for handlers that claim the inbox).
	AlreadyReplayed bool
}

// Replay runs the consumer's handler on dead letter seq (natsx.Replay) and stores the outcome
// with by as the one who replayed it. Errors: those of Show; natsx.ErrNotReplayable for an
// advisory; ErrReplayFailed, wrapping the handler's error, when the handler fails again — that
// outcome is stored too, and the dead letter stays pending. A replay that succeeds but cannot
// be stored is an error as well; replaying it again is safe (the inbox).
func (a *Admin) Replay(ctx context.Context, seq uint64, by string) (ReplayResult, error) {
	e, err := a.Show(ctx, seq)
	if err != nil {
		return ReplayResult{}, err
	}
	res := ReplayResult{AlreadyReplayed: e.Replayed()}
	herr := natsx.Replay(ctx, a.handlers[e.Consumer], e.DeadLetter)
	if errors.Is(herr, natsx.ErrNotReplayable) {
		return ReplayResult{}, herr
	}
	r := Replay{At: time.Now().UTC(), By: by, Outcome: OutcomeDone}
	if herr != nil {
		r.Outcome, r.Error = OutcomeFailed, herr.Error()
	}
	if err := a.store(ctx, e.DeadLetter, r); err != nil {
		if herr == nil {
			a.log.Error("dead letter replayed but the replay not stored", "dl_seq", seq, "consumer", e.Consumer, "err", err)
			return ReplayResult{}, fmt.Errorf("dead letter %d replayed, but not recorded (replaying it again is safe): %w", seq, err)
		}
		return ReplayResult{}, errors.Join(fmt.Errorf("replay dead letter %d: %w: %w", seq, ErrReplayFailed, herr), err)
	}
	e.Replays = append(e.Replays, r)
	res.Entry = e
	if herr != nil {
		a.log.Warn("dead letter replay failed", "dl_seq", seq, "consumer", e.Consumer, "by", by, "err", herr)
		return res, fmt.Errorf("replay dead letter %d: %w: %w", seq, ErrReplayFailed, herr)
	}
	a.log.Info("dead letter replayed", "dl_seq", seq, "consumer", e.Consumer, "by", by, "already_replayed", res.AlreadyReplayed)
	return res, nil
}

func (a *Admin) store(ctx context.Context, dl natsx.DeadLetter, r Replay) error {
	_, err := a.pool.Exec(ctx, `INSERT INTO deadletter_replay (dl_seq, stream, stream_seq, consumer, outcome, error, replayed_by, replayed_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		int64(dl.Seq), dl.Stream, int64(dl.StreamSeq), dl.Consumer, r.Outcome, r.Error, r.By, r.At)
	if err != nil {
		return fmt.Errorf("store replay of dead letter %d: %w", dl.Seq, err)
	}
	return nil
}

// withReplays pairs each dead letter with its stored replays: those of its DEADLETTER sequence
// and the same original (stream, sequence, consumer).
func (a *Admin) withReplays(ctx context.Context, dls []natsx.DeadLetter) ([]Entry, error) {
	entries := make([]Entry, len(dls))
	if len(dls) == 0 {
		return entries, nil
	}
	seqs := make([]int64, len(dls))
	for i, dl := range dls {
		entries[i].DeadLetter = dl
		seqs[i] = int64(dl.Seq)
	}
	rows, err := a.pool.Query(ctx, `SELECT dl_seq, stream, stream_seq, consumer, outcome, error, replayed_by, replayed_at
		FROM deadletter_replay WHERE dl_seq = ANY($1) ORDER BY id`, seqs)
	if err != nil {
		return nil, fmt.Errorf("dead letter replays: %w", err)
	}
	type key struct {
		seq, streamSeq   int64
		stream, consumer string
	}
	byKey := map[key][]Replay{}
	var k key
	var r Replay
	if _, err := pgx.ForEachRow(rows, []any{&k.seq, &k.stream, &k.streamSeq, &k.consumer, &r.Outcome, &r.Error, &r.By, &r.At}, func() error {
		r.At = r.At.UTC()
		byKey[k] = append(byKey[k], r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("dead letter replays: %w", err)
	}
	for i, dl := range dls {
		entries[i].Replays = byKey[key{seq: int64(dl.Seq), streamSeq: int64(dl.StreamSeq), stream: dl.Stream, consumer: dl.Consumer}]
	}
	return entries, nil
}

func consumerName(dl natsx.DeadLetter) string {
	if dl.Consumer == "" {
		return "no consumer"
	}
	return "consumer " + dl.Consumer
}
