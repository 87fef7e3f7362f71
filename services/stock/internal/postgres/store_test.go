package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/pkg/service"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

func setup(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := pgtest.New(t, service.Schemas(postgres.Schema)...)
	return postgres.NewStore(pool), pool
}

// A state or change type the code does not know — a row written by a newer version, or by
// hand past the schema's checks — is refused when read, not passed on as a string.
func TestUnknownValuesFromTheDatabaseAreRefusedOnLoad(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	var adjustment int64
	require.NoError(t, store.InTx(ctx, func(tx app.Tx) error {
		if _, err := tx.CreateSKU(ctx, "CUP-1", 10, "t"); err != nil {
			return err
		}
		if _, err := tx.LockOrders(ctx, []stock.LockRequest{{OrderID: "o1", Lines: []stock.Line{{SKU: "CUP-1", Qty: stock.MustQty(1)}},
			Deadline: time.Now().Add(time.Hour), Operator: "t"}}); err != nil {
			return err
		}
		a, err := tx.RequestAdjustment(ctx, stock.Adjustment{SKU: "CUP-1", Kind: stock.ChangeManualAdjust, Delta: new(int64(1)),
			Reason: "found one", RequestedBy: "alice", State: stock.AdjustmentPending})
		adjustment = a.ID
		return err
	}))
	_, err := pool.Exec(ctx, `
		ALTER TABLE stock_lock DROP CONSTRAINT stock_lock_state_check;
		ALTER TABLE stock_ledger DROP CONSTRAINT stock_ledger_change_type_check;
		ALTER TABLE adjustment DROP CONSTRAINT adjustment_state_check;
		UPDATE stock_lock SET state = 'returned';
		UPDATE adjustment SET state = 'archived';
		INSERT INTO stock_ledger (sku, slot, change_type, qty, on_hand_before, locked_before, sold_before, incoming_before,
		                          on_hand_after, locked_after, sold_after, incoming_after, operator, idempotency_key)
		VALUES ('CUP-1', 0, 'teleport', 1, 10, 1, 0, 0, 10, 1, 0, 0, 't', 'teleport/1')`)
	require.NoError(t, err)

	_, err = store.Locks(ctx, "o1")
	assert.ErrorIs(t, err, stock.ErrUnknownValue, "lock state")
	_, err = store.Ledger(ctx, "CUP-1", app.LedgerQuery{Limit: 100})
	assert.ErrorIs(t, err, stock.ErrUnknownValue, "change type")
	_, err = store.GetAdjustment(ctx, adjustment)
	assert.ErrorIs(t, err, stock.ErrUnknownValue, "adjustment state")
}

// TestALedgerRowIsStampedWhenItIsWritten: a ledger row's created_at (and a lock's
// resolved_at) is the time its statement ran, not its transaction's BEGIN: a combined batch
// begins, then decides in Go whether a timeout is due, and a release decided after its
// deadline must not read as made before it.
func TestALedgerRowIsStampedWhenItIsWritten(t *testing.T) {
	ctx := context.Background()
	store, pool := setup(t)
	var decided time.Time
	require.NoError(t, store.InTx(ctx, func(tx app.Tx) error {
		if _, err := tx.CreateSKU(ctx, "CUP-1", 10, "t"); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond) // the transaction began before this
		decided = time.Now().Truncate(time.Microsecond)
		_, err := tx.LockOrders(ctx, []stock.LockRequest{{OrderID: "o1", Lines: []stock.Line{{SKU: "CUP-1", Qty: stock.MustQty(1)}},
			Deadline: time.Now().Add(time.Hour), Operator: "t"}})
		return err
	}))
	var stamped time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT created_at FROM stock_ledger WHERE change_type = 'lock'`).Scan(&stamped))
	assert.False(t, stamped.Before(decided), "stamped %s, decided %s", stamped, decided)
}
