package app

import (
	"context"
	"time"

	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// Store is the stock repository the use cases run on; internal/postgres implements it.
type Store interface {
	// InTx runs fn in one transaction, committed when fn returns nil.
	InTx(ctx context.Context, fn func(Tx) error) error
	// InBatch runs units in one transaction as outbox.Batch does: it claims their messages,
	// fn does the work of the fresh ones (indexes into units) and sets their Msgs or Err, and
	// the failed ones' claims are withdrawn.
	//
	// A movement the summaries' guard refuses (it would take a figure below zero) fails
	// InTx and InBatch with an error wrapping *OversellError.
	InBatch(ctx context.Context, units []*outbox.Unit, fn func(tx Tx, fresh []int) error) error
	Reads
}

// Tx is one unit of work: every method runs inside the same transaction.
type Tx interface {
	// CreateSKU adds a SKU; a positive onHand is recorded as the opening stocktake row.
	// ErrSKUExists when the SKU is already there.
	CreateSKU(ctx context.Context, sku string, onHand int64, operator string) (stock.SKUStock, error)
	// Move makes one movement not tied to an order under the caller's idempotency key: the
	// same key again returns the first entry with duplicate=true; the same key for a different
	// movement returns ErrIdempotencyReuse.
	Move(ctx context.Context, m stock.Movement, operator, key string) (e stock.LedgerEntry, duplicate bool, err error)
	// SetSlots sets how many slots of a SKU take new locks and rebalances it.
	SetSlots(ctx context.Context, sku string, n int, operator string) ([]stock.LedgerEntry, error)
	// Rebalance spreads a SKU's available units evenly over its active slots.
	Rebalance(ctx context.Context, sku, operator string) ([]stock.LedgerEntry, error)
	// RequestAdjustment stores a pending adjustment; a stocktake records its ledger point.
	RequestAdjustment(ctx context.Context, a stock.Adjustment) (stock.Adjustment, error)
	// DecideAdjustment approves (applying its movement) or rejects a pending adjustment.
	DecideAdjustment(ctx context.Context, id int64, approve bool, by string) (stock.Adjustment, error)
	// LockOrders locks many orders, each all or none, in the order given; a rejection is an
	// outcome, an order seen before (or twice) returns its first outcome with Duplicate set.
	LockOrders(ctx context.Context, reqs []stock.LockRequest) ([]stock.LockResult, error)
	// UpdateLocks is the one way orders' locks change: each Step transitions its order's
	// locks (held FOR UPDATE) and the movements are applied all or none per order.
	UpdateLocks(ctx context.Context, ups []stock.LockUpdate) ([]stock.LockUpdateResult, error)
	// PaidBy returns the payment recorded as having sold an order ("" when none).
	PaidBy(ctx context.Context, orderID string) (string, error)
	// RecordPayments records, per order, the payment that sold it (orders[i] by payments[i]).
	RecordPayments(orders, payments []string)
}

// Reads are the store's queries (and the summary rebuild), outside any use case's transaction.
type Reads interface {
	GetSKU(ctx context.Context, sku string) (stock.SKUStock, error)
	Ledger(ctx context.Context, sku string, after int64, limit int) ([]stock.LedgerEntry, error)
	Locks(ctx context.Context, orderID string) ([]*stock.Lock, error)
	GetAdjustment(ctx context.Context, id int64) (stock.Adjustment, error)
	GetOrderOutcome(ctx context.Context, orderID string) (stock.OrderOutcome, error)
	Verify(ctx context.Context) ([]stock.Difference, error)
	Rebuild(ctx context.Context) ([]string, error)
	OverdueLocks(ctx context.Context, cutoff time.Time, limit int) (int, []string, error)
	HeldOrders(ctx context.Context, cutoff time.Time, limit int) (int, []string, error)
	CountSKUs(ctx context.Context) (int, error)
	// SKUQuantities returns the figures of those of skus that exist (the sums over their
	// slots), in one query.
	SKUQuantities(ctx context.Context, skus []string) (map[string]stock.Quantities, error)
	// CountOverdueLocks counts the locks still held whose deadline is before cutoff.
	CountOverdueLocks(ctx context.Context, cutoff time.Time) (int, error)
}
