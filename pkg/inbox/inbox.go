// Package inbox makes message consumers idempotent: a consumer claims a message id in the same
// transaction as the message's effect, so a redelivered message (JetStream delivers at least
// once) is recognised and acknowledged without applying its effect twice.
package inbox

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockflow/stockflow/pkg/postgres"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema creates the inbox table. Migrate it into every database whose consumers use Claim.
var Schema = postgres.MigrationsSchema("inbox", migrations)

// Claim records that consumer processes messageID, inside tx. fresh is true the first time:
// apply the effect in the same tx and commit. fresh is false when the message was already
// processed (by an earlier delivery, or by a concurrent one whose tx committed first): do
// nothing, and acknowledge the message. While another open transaction holds the same claim,
// Claim waits for it to finish, so exactly one of two concurrent deliveries is fresh.
//
// Use the event id (the Nats-Msg-Id) as messageID and the durable consumer name as consumer.
func Claim(ctx context.Context, tx pgx.Tx, consumer, messageID string) (fresh bool, err error) {
	f, err := ClaimAll(ctx, tx, []Message{{Consumer: consumer, ID: messageID}})
	if err != nil {
		return false, err
	}
	return f[0], nil
}

// Message names one message a consumer processes.
type Message struct{ Consumer, ID string }

// ClaimAll is Claim for many messages in one statement: fresh[i] tells whether msgs[i] is
// claimed now. Claims are taken in (consumer, id) order, so two batches sharing messages wait
// for each other instead of deadlocking. A message twice in msgs is fresh at most once.
func ClaimAll(ctx context.Context, tx pgx.Tx, msgs []Message) (fresh []bool, err error) {
	consumers := make([]string, len(msgs))
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		if m.Consumer == "" || m.ID == "" {
			return nil, errors.New("inbox claim: empty consumer or message id")
		}
		consumers[i], ids[i] = m.Consumer, m.ID
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO inbox (consumer, message_id)
		SELECT c, m FROM unnest($1::text[], $2::text[]) AS u(c, m) ORDER BY c, m
		ON CONFLICT (consumer, message_id) DO NOTHING
		RETURNING consumer, message_id`, consumers, ids)
	if err != nil {
		return nil, fmt.Errorf("inbox claim %d messages: %w", len(msgs), err)
	}
	claimed := map[Message]bool{}
	for rows.Next() {
		var m Message
		if err := rows.Scan(&m.Consumer, &m.ID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("inbox claim %d messages: %w", len(msgs), err)
		}
		claimed[m] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inbox claim %d messages: %w", len(msgs), err)
	}
	fresh = make([]bool, len(msgs))
	for i, m := range msgs {
		fresh[i] = claimed[m]
		delete(claimed, m)
	}
	return fresh, nil
}

// Unclaim withdraws claims taken earlier in tx, for messages that failed while others in
// the same transaction succeeded: the transaction commits without them, and their redelivery
// is fresh again.
func Unclaim(ctx context.Context, tx pgx.Tx, msgs []Message) error {
	var b pgx.Batch
	QueueUnclaim(&b, msgs)
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("inbox unclaim %d messages: %w", len(msgs), err)
	}
	return nil
}

// QueueUnclaim is Unclaim queued on b, for a caller that sends its transaction's last writes
// in one round trip; nothing is queued for no messages.
func QueueUnclaim(b *pgx.Batch, msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	consumers := make([]string, len(msgs))
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		consumers[i], ids[i] = m.Consumer, m.ID
	}
	b.Queue(`DELETE FROM inbox USING unnest($1::text[], $2::text[]) AS u(c, m)
		WHERE inbox.consumer = u.c AND inbox.message_id = u.m`, consumers, ids)
}

// Execer is what Prune needs: a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// pruneChunk is the most claims one Prune statement deletes: a backlog goes in short
// statements (each its own transaction on a pool), never one long DELETE holding back the
// outbox relays of the whole server.
const pruneChunk = 10000

// Prune deletes claims processed more than olderThan ago and returns how many. Keep claims far
// longer than a message can be redelivered or replayed (the streams keep 14 days).
func Prune(ctx context.Context, db Execer, olderThan time.Duration) (int64, error) {
	if olderThan <= 0 {
		return 0, errors.New("inbox prune: retention must be positive")
	}
	var total int64
	for {
		tag, err := db.Exec(ctx, `DELETE FROM inbox WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM inbox WHERE processed_at < now() - $1::interval LIMIT $2))`, olderThan, pruneChunk)
		if err != nil {
			return total, fmt.Errorf("inbox prune: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneChunk {
			return total, nil
		}
	}
}
