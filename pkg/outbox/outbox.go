// Package outbox is the transactional outbox: Write stores events in the caller's transaction,
// next to the state change they announce, and a Relay publishes committed rows to JetStream
// with Nats-Msg-Id = event id. Nothing is ever published for a rolled-back transaction, and
// nothing committed is lost: a row stays pending until JetStream has acknowledged it.
//
// Delivery is at least once. A row published but not yet passed by the relay's cursor (relay
// crash, failed commit) is published again on the next pass; JetStream's duplicate window (natsx.DuplicateWindow)
// absorbs that, and consumers' inbox absorbs anything later.
//
// Order: the relay reads only rows whose transaction is older than every transaction still
// running in its database (the server's snapshot, pg_current_snapshot, narrowed to this
// database's sessions: see horizon in relay.go; watermill-sql's approach uses the server-wide
// pg_snapshot_xmin), in (txid, id) order, and only one relay per database publishes at a time
// (an advisory lock). So rows of a long-open transaction are never skipped, and rows are
// published in the order their transactions began writing. The price: a long-running write
// transaction in the service's own database delays its publishing until it ends; one in
// another database on the same server does not.
package outbox

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/telemetry"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema creates the outbox table. Migrate it into every database whose service uses Write.
var Schema = postgres.MigrationsSchema("outbox", migrations)

// MaxMessageBytes bounds one message's body and headers: half NATS's default max_payload
// (1 MiB), which every server configuration stockflow ships keeps. A row the server refuses
// could never be published and would hold back every row after it (review F17), so Write
// refuses it instead, in the transaction that writes it. No event comes near it today.
const MaxMessageBytes = 512 << 10

// ErrTooLarge is returned by Write and Stage for a message above MaxMessageBytes.
var ErrTooLarge = errors.New("outbox message too large")

// Write stores msgs in tx, to be published once tx commits, in one statement whatever their
// number. Each message's Headers are stored with the W3C trace context of ctx added
// (traceparent, tracestate), so consumers continue the caller's trace; a message that
// already carries a traceparent keeps it. A message whose ID is already in the outbox is
// skipped: the same fact is published once.
//
// Write returns an error for a message without ID or Subject, and ErrTooLarge for one whose
// body and headers exceed MaxMessageBytes; nothing is stored then.
func Write(ctx context.Context, tx pgx.Tx, msgs ...events.Message) error {
	var b pgx.Batch
	if err := Stage(ctx, &b, msgs...); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("outbox write %d messages: %w", len(msgs), err)
	}
	return nil
}

// Stage is Write queued on b, for a caller that sends its transaction's writes in one round
// trip: the rows are stored when b is sent inside the transaction.
func Stage(ctx context.Context, b *pgx.Batch, msgs ...events.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]string, len(msgs))
	subjects := make([]string, len(msgs))
	data := make([][]byte, len(msgs))
	headers := make([]string, len(msgs))
	for i, m := range msgs {
		if m.ID == "" || m.Subject == "" {
			return fmt.Errorf("outbox write: message %d without id or subject", i)
		}
		h := make(map[string]string, len(m.Headers)+2)
		if m.Headers["traceparent"] == "" {
			telemetry.InjectMap(ctx, h)
		}
		maps.Copy(h, m.Headers)
		hb, err := json.Marshal(h)
		if err != nil {
			return fmt.Errorf("outbox write %s: headers: %w", m.ID, err)
		}
		if n := len(m.Data) + len(hb); n > MaxMessageBytes {
			return fmt.Errorf("outbox write %s: %w: %d bytes of body and headers, at most %d", m.ID, ErrTooLarge, n, MaxMessageBytes)
		}
		ids[i], subjects[i], data[i], headers[i] = m.ID, m.Subject, m.Data, string(hb)
		if data[i] == nil {
			data[i] = []byte{}
		}
	}
	b.Queue(`
		INSERT INTO outbox (event_id, subject, data, headers)
		SELECT e, s, d, h::jsonb FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[]) AS u(e, s, d, h)
		ON CONFLICT (event_id) DO NOTHING`,
		ids, subjects, data, headers)
	return nil
}

// errNotLeader is returned by a pass that found another relay publishing.
var errNotLeader = errors.New("another relay holds the outbox lock")

// InTx is the transaction of a message consumer (or of a call that emits events): it claims
// msg in the inbox (nil: no message, nothing to claim) — a message processed before returns
// duplicate=true and fn does not run — then runs fn and writes the events fn returns to the
// outbox, all in one transaction of db, so a crash at any line loses or duplicates nothing.
// An error from fn rolls everything back, the claim included. It is a Batch of one unit.
func InTx(ctx context.Context, db postgres.Beginner, msg *inbox.Message, fn func(pgx.Tx) ([]events.Message, error)) (duplicate bool, err error) {
	u := &Unit{In: msg}
	err = Batch(ctx, db, []*Unit{u}, func(tx pgx.Tx, _ *pgx.Batch, _ []int) error {
		var err error
		u.Msgs, err = fn(tx)
		return err
	})
	return u.Dup, err
}
