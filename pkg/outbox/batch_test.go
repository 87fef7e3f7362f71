package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// batchDB is a database with the outbox and the inbox, and what the test reads back from it.
type batchDB struct {
	t    *testing.T
	pool *pgxpool.Pool
}

func newBatchDB(t *testing.T) batchDB {
	pool, _ := pgtest.New(t, outbox.Schema, inbox.Schema)
	return batchDB{t: t, pool: pool}
}

func (d batchDB) strings(sql string) []string {
	d.t.Helper()
	rows, err := d.pool.Query(context.Background(), sql)
	require.NoError(d.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(d.t, err)
	return out
}

func (d batchDB) claimed() []string {
	return d.strings(`SELECT message_id FROM inbox ORDER BY message_id`)
}
func (d batchDB) written() []string {
	return d.strings(`SELECT event_id FROM outbox ORDER BY event_id`)
}

func consumes(id string) *outbox.Unit {
	return &outbox.Unit{In: &inbox.Message{Consumer: "c", ID: id}}
}

// emitOrFail is a run that gives each fresh unit the event ev-<its message id> (ev-http for a
// unit without message), or fails the units whose message id is in fail.
func emitOrFail(units []*outbox.Unit, ran *[]int, fail ...string) func(pgx.Tx, *pgx.Batch, []int) error {
	return func(_ pgx.Tx, _ *pgx.Batch, fresh []int) error {
		*ran = append(*ran, fresh...)
		for _, i := range fresh {
			u, id := units[i], "http"
			if u.In != nil {
				id = u.In.ID
			}
			for _, f := range fail {
				if f == id {
					u.Err = errors.New("no")
				}
			}
			if u.Err == nil {
				u.Msgs = []events.Message{{ID: "ev-" + id, Subject: "stock.locked", Data: []byte("{}")}}
			}
		}
		return nil
	}
}

func TestBatchRunsFreshUnitsOnceEachAndWithdrawsTheClaimsOfFailedOnes(t *testing.T) {
	ctx := context.Background()
	db := newBatchDB(t)
	_, err := outbox.InTx(ctx, db.pool, &inbox.Message{Consumer: "c", ID: "seen"}, func(pgx.Tx) ([]events.Message, error) { return nil, nil })
	require.NoError(t, err)

	units := []*outbox.Unit{consumes("m-1"), consumes("seen"), consumes("m-2"), consumes("m-1"), {}, consumes("bad")}
	var ran []int
	require.NoError(t, outbox.Batch(ctx, db.pool, units, emitOrFail(units, &ran, "bad")))

	assert.Equal(t, []int{0, 2, 4, 5}, ran, "the fresh units, in order")
	var dups []bool
	for _, u := range units {
		dups = append(dups, u.Dup)
	}
	assert.Equal(t, []bool{false, true, false, true, false, false}, dups, "processed before, or twice in the batch")
	assert.Error(t, units[5].Err)
	assert.Equal(t, []string{"m-1", "m-2", "seen"}, db.claimed(), "the failed unit's claim is withdrawn: its message is retried")
	assert.Equal(t, []string{"ev-http", "ev-m-1", "ev-m-2"}, db.written(), "the events of the units that did their work")
}

func TestBatchInWhichEveryUnitFailedIsRolledBack(t *testing.T) {
	ctx := context.Background()
	db := newBatchDB(t)
	units := []*outbox.Unit{consumes("m-1"), {}, consumes("m-2")}
	var ran []int
	run := emitOrFail(units, &ran, "m-1", "m-2", "http")
	err := outbox.Batch(ctx, db.pool, units, func(tx pgx.Tx, b *pgx.Batch, fresh []int) error {
		b.Queue(`INSERT INTO outbox (event_id, subject, data) VALUES ('queued', 's', '')`)
		return run(tx, b, fresh)
	})
	require.NoError(t, err, "each unit has its error")
	for _, u := range units {
		assert.Error(t, u.Err)
	}
	assert.Empty(t, db.claimed(), "no claim is left")
	assert.Empty(t, db.written(), "what run queued is not written")
}

func TestBatchRunErrorRollsBackEveryUnit(t *testing.T) {
	ctx := context.Background()
	db := newBatchDB(t)
	units := []*outbox.Unit{consumes("m-1"), consumes("m-2")}
	boom := errors.New("boom")
	err := outbox.Batch(ctx, db.pool, units, func(tx pgx.Tx, _ *pgx.Batch, _ []int) error {
		require.NoError(t, outbox.Write(ctx, tx, events.Message{ID: "ev-1", Subject: "s", Data: []byte("{}")}))
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Empty(t, db.claimed())
	assert.Empty(t, db.written())

	var ran []int
	require.NoError(t, outbox.Batch(ctx, db.pool, units, emitOrFail(units, &ran)))
	assert.Equal(t, []int{0, 1}, ran, "the messages are fresh again")
}
