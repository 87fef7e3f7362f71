package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/natsx"
)

// OutboxJobName is the name of the job OutboxJob returns.
const OutboxJobName = "outbox"

// OutboxOptions configure OutboxJob.
type OutboxOptions struct {
	// Interval is the schedule (0: off).
	Interval time.Duration
	// Age is how long a row may stay unpublished before it is a finding.
	Age time.Duration
	// LagMax is how many messages a consumer may have pending (not yet delivered plus
	// delivered and unacknowledged) before it is a finding.
	LagMax int
	// Consumers are the service's durable consumers (stream and durable name).
	Consumers []natsx.ConsumerSpec
	// Publish publishes every pending outbox row now (outbox.Relay.PublishPending): the repair.
	Publish func(ctx context.Context) (int, error)
}

// maxListed bounds the findings one run lists for stuck outbox rows; the rest are counted
// in one more finding.
const maxListed = 100

// maxDeadLetters bounds how many DEADLETTER messages one run reads.
const maxDeadLetters = 10000

// OutboxJob returns job 6 of every service: outbox rows unpublished for longer than Age
// (repair: publish them now), consumers lagging by more than LagMax messages or missing, and
// the messages each of the service's consumers dead-lettered (kind dead_letters; these wait
// for a human: inspect, fix, replay or purge). Lag and dead letters are reported, not
// repaired.
func OutboxJob(pool *pgxpool.Pool, js jetstream.JetStream, o OutboxOptions) Job {
	return Job{Name: OutboxJobName, Interval: o.Interval, Run: func(ctx context.Context, mode Mode) (Result, error) {
		var res Result
		if err := stuckRows(ctx, pool, o, mode, &res); err != nil {
			return res, err
		}
		if err := consumerLag(ctx, js, o, &res); err != nil {
			return res, err
		}
		return res, deadLetters(ctx, js, o.Consumers, &res)
	}}
}

func stuckRows(ctx context.Context, pool *pgxpool.Pool, o OutboxOptions, mode Mode, res *Result) error {
	var total int
	var oldest *time.Time
	if err := pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM outbox_unpublished WHERE created_at < now() - $1::interval`,
		o.Age).Scan(&total, &oldest); err != nil {
		return fmt.Errorf("stuck outbox rows: %w", err)
	}
	res.Checked += total
	if total == 0 {
		return nil
	}
	rows, err := pool.Query(ctx, `SELECT event_id, subject, created_at FROM outbox_unpublished WHERE created_at < now() - $1::interval
		ORDER BY id LIMIT $2`, o.Age, maxListed)
	if err != nil {
		return fmt.Errorf("stuck outbox rows: %w", err)
	}
	type stuck struct {
		id, subject string
		at          time.Time
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stuck, error) {
		var s stuck
		return s, r.Scan(&s.id, &s.subject, &s.at)
	})
	if err != nil {
		return fmt.Errorf("stuck outbox rows: %w", err)
	}
	published := map[string]bool{}
	var repairErr string
	if mode == Repair {
		ids := make([]string, len(list))
		for i, s := range list {
			ids[i] = s.id
		}
		if _, err := o.Publish(ctx); err != nil {
			repairErr = err.Error()
		}
		done, err := pool.Query(ctx, `SELECT o.event_id FROM outbox o WHERE o.event_id = ANY($1)
			AND NOT EXISTS (SELECT 1 FROM outbox_unpublished u WHERE u.id = o.id)`, ids)
		if err != nil {
			return fmt.Errorf("stuck outbox rows: %w", err)
		}
		got, err := pgx.CollectRows(done, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("stuck outbox rows: %w", err)
		}
		for _, id := range got {
			published[id] = true
		}
	}
	for _, s := range list {
		f := Finding{Kind: "outbox_unpublished", IDs: map[string]string{"event_id": s.id, "subject": s.subject},
			Detail: fmt.Sprintf("written %s ago, not published", time.Since(s.at).Round(time.Second)), Repaired: published[s.id]}
		if mode == Repair && !f.Repaired {
			f.Error = repairErr
			if f.Error == "" {
				f.Error = "still pending: another relay holds the outbox lock, or an open transaction in this database holds the relay back"
			}
		}
		res.Findings = append(res.Findings, f)
	}
	if total > len(list) {
		res.Findings = append(res.Findings, Finding{Kind: "outbox_unpublished_more", Values: map[string]int64{"rows": int64(total - len(list))},
			Detail: fmt.Sprintf("%d more unpublished rows, oldest written %s", total-len(list), oldest.UTC().Format(time.RFC3339))})
	}
	return nil
}

func consumerLag(ctx context.Context, js jetstream.JetStream, o OutboxOptions, res *Result) error {
	for _, c := range o.Consumers {
		res.Checked++
		ids := map[string]string{"stream": c.Stream, "consumer": c.Durable}
		cons, err := js.Consumer(ctx, c.Stream, c.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			res.Findings = append(res.Findings, Finding{Kind: "consumer_missing", IDs: ids,
				Detail: "the durable consumer does not exist: the service has not started consuming"})
			continue
		}
		if err != nil {
			return fmt.Errorf("consumer %s: %w", c.Durable, err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("consumer %s: %w", c.Durable, err)
		}
		lag := int64(info.NumPending) + int64(info.NumAckPending)
		if lag > int64(o.LagMax) {
			res.Findings = append(res.Findings, Finding{Kind: "consumer_lag", IDs: ids,
				Values: map[string]int64{"num_pending": int64(info.NumPending), "num_ack_pending": int64(info.NumAckPending),
					"num_redelivered": int64(info.NumRedelivered), "lag_max": int64(o.LagMax)},
				Detail: fmt.Sprintf("%d messages behind (more than %d)", lag, o.LagMax)})
		}
	}
	return nil
}

// deadLetters counts the DEADLETTER messages of each of consumers: copies made by
// natsx.Consume (header Stockflow-DL-Consumer) and the server's max-deliveries advisories
// (subject …MAX_DELIVERIES.<stream>.<consumer>). It reads headers only.
func deadLetters(ctx context.Context, js jetstream.JetStream, consumers []natsx.ConsumerSpec, res *Result) error {
	ours := map[string]natsx.ConsumerSpec{}
	for _, c := range consumers {
		ours[c.Durable] = c
	}
	if len(ours) == 0 {
		return nil
	}
	stream, err := js.Stream(ctx, natsx.StreamDeadLetter)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	oc, err := js.OrderedConsumer(ctx, natsx.StreamDeadLetter, jetstream.OrderedConsumerConfig{HeadersOnly: true, InactiveThreshold: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	counts := map[string]int64{}
	advisory := strings.TrimSuffix(natsx.SubjectsMaxDeliveries, ">")
	for read := 0; read < maxDeadLetters && uint64(read) < info.State.Msgs; {
		batch, err := oc.Fetch(min(256, maxDeadLetters-read), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
		n, last := 0, uint64(0)
		for m := range batch.Messages() {
			n++
			durable := m.Headers().Get(natsx.HeaderDLConsumer)
			if rest, ok := strings.CutPrefix(m.Subject(), advisory); ok {
				durable = rest[strings.LastIndex(rest, ".")+1:]
			}
			counts[durable]++
			if md, err := m.Metadata(); err == nil {
				last = md.Sequence.Stream
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("dead letters: %w", err)
		}
		read += n
		if n == 0 || last >= info.State.LastSeq {
			break
		}
	}
	for _, c := range consumers {
		if n := counts[c.Durable]; n > 0 {
			res.Findings = append(res.Findings, Finding{Kind: "dead_letters",
				IDs: map[string]string{"stream": c.Stream, "consumer": c.Durable}, Values: map[string]int64{"messages": n},
				Detail: strconv.FormatInt(n, 10) + " messages dead-lettered (stream " + natsx.StreamDeadLetter + "): inspect, then replay or purge"})
		}
	}
	return nil
}
