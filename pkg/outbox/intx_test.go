package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

func TestInTxClaimsRunsAndWritesOrRollsBackTogether(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.New(t, outbox.Schema, inbox.Schema)
	rows := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox) + (SELECT count(*) FROM inbox)`).Scan(&n))
		return n
	}
	msg := &inbox.Message{Consumer: "c", ID: "m-1"}
	emit := func(pgx.Tx) ([]events.Message, error) {
		return []events.Message{{ID: "ev-1", Subject: "stock.locked", Data: []byte("{}")}}, nil
	}

	boom := errors.New("boom")
	_, err := outbox.InTx(ctx, pool, msg, func(pgx.Tx) ([]events.Message, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	assert.Zero(t, rows(), "a failed effect leaves neither claim nor event")

	dup, err := outbox.InTx(ctx, pool, msg, emit)
	require.NoError(t, err)
	assert.False(t, dup)
	assert.Equal(t, 2, rows(), "the claim and the event")

	ran := false
	dup, err = outbox.InTx(ctx, pool, msg, func(pgx.Tx) ([]events.Message, error) { ran = true; return nil, nil })
	require.NoError(t, err)
	assert.True(t, dup, "the same message again")
	assert.False(t, ran, "its effect does not run")

	_, err = outbox.InTx(ctx, pool, nil, func(pgx.Tx) ([]events.Message, error) {
		return []events.Message{{ID: "ev-2", Subject: "stock.locked", Data: []byte("{}")}}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, rows(), "no message: nothing to claim, the event is written")
}
