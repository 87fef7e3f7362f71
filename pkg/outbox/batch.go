package outbox

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/postgres"
)

// Unit is one request's share of a Batch: the message it consumes and, once run, what it
// emits or why it failed.
type Unit struct {
	In   *inbox.Message   // the message consumed; nil for a call that consumes none (HTTP)
	Dup  bool             // set by Batch: In was processed before, or earlier in the batch; the unit did not run
	Msgs []events.Message // set by run: the events the unit emits
	Err  error            // set by run: the unit failed and wrote nothing; its claim is withdrawn
}

// errNoneDone rolls back a batch in which every unit that ran failed.
var errNoneDone = errors.New("every unit of the batch failed")

// Batch is InTx for many units in one transaction of db. It claims the units' messages in one
// statement (a message processed before, or twice in units, marks its unit Dup and leaves it
// out), lets run do the work of the fresh units (fresh indexes units; run sets their Msgs or
// Err and may queue writes on b), then withdraws the claims of the units that failed, so their
// messages are retried, and writes the others' Msgs to the outbox. The withdrawals and the
// outbox rows are queued on b, which is sent with the COMMIT (InTxBatch).
//
// An error from run rolls back every unit; a batch in which every fresh unit failed is rolled
// back too and returns nil (each unit has its Err). A crash at any line loses or duplicates
// nothing. Each unit found Dup in a batch that returns nil counts once in the counter
// stockflow.inbox.duplicates (label consumer).
func Batch(ctx context.Context, db postgres.Beginner, units []*Unit, run func(tx pgx.Tx, b *pgx.Batch, fresh []int) error) error {
	err := InTxBatch(ctx, db, func(tx pgx.Tx, b *pgx.Batch) error {
		fresh, err := claim(ctx, tx, units)
		if err != nil || len(fresh) == 0 {
			return err
		}
		if err := run(tx, b, fresh); err != nil {
			return err
		}
		var failed []inbox.Message
		var msgs []events.Message
		nFailed := 0
		for _, i := range fresh {
			u := units[i]
			switch {
			case u.Err == nil:
				msgs = append(msgs, u.Msgs...)
			case u.In != nil:
				failed, nFailed = append(failed, *u.In), nFailed+1
			default:
				nFailed++
			}
		}
		if nFailed == len(fresh) {
			return errNoneDone
		}
		inbox.QueueUnclaim(b, failed)
		return Stage(ctx, b, msgs...)
	})
	if errors.Is(err, errNoneDone) {
		err = nil
	}
	if err == nil {
		countDuplicates(ctx, units)
	}
	return err
}

// claim starts units over (a batch run again gets fresh answers), claims the messages of those
// that consume one and returns the indexes of the fresh units.
func claim(ctx context.Context, tx pgx.Tx, units []*Unit) ([]int, error) {
	var msgs []inbox.Message
	var consuming []int
	for i, u := range units {
		u.Dup, u.Msgs, u.Err = false, nil, nil
		if u.In != nil {
			msgs, consuming = append(msgs, *u.In), append(consuming, i)
		}
	}
	if len(msgs) > 0 {
		claimed, err := inbox.ClaimAll(ctx, tx, msgs)
		if err != nil {
			return nil, err
		}
		for k, i := range consuming {
			units[i].Dup = !claimed[k]
		}
	}
	var fresh []int
	for i, u := range units {
		if !u.Dup {
			fresh = append(fresh, i)
		}
	}
	return fresh, nil
}
