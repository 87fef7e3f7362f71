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
	if consumer == "" || messageID == "" {
		return false, errors.New("inbox claim: empty consumer or message id")
	}
	tag, err := tx.Exec(ctx,
		`INSERT INTO inbox (consumer, message_id) VALUES ($1, $2) ON CONFLICT (consumer, message_id) DO NOTHING`,
		consumer, messageID)
	if err != nil {
		return false, fmt.Errorf("inbox claim %s/%s: %w", consumer, messageID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Execer is what Prune needs: a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Prune deletes claims processed more than olderThan ago and returns how many. Keep claims far
// longer than a message can be redelivered or replayed (the streams keep 14 days).
func Prune(ctx context.Context, db Execer, olderThan time.Duration) (int64, error) {
	if olderThan <= 0 {
		return 0, errors.New("inbox prune: retention must be positive")
	}
	tag, err := db.Exec(ctx, `DELETE FROM inbox WHERE processed_at < now() - $1::interval`, olderThan)
	if err != nil {
		return 0, fmt.Errorf("inbox prune: %w", err)
	}
	return tag.RowsAffected(), nil
}
