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
	// CreatePurchaseOrder stores p and raises incoming by its units (p.Expect) under the
	// caller's idempotency key: the same key again returns the first order with
	// duplicate=true; the same key for another SKU or quantity returns ErrIdempotencyReuse.
	CreatePurchaseOrder(ctx context.Context, p stock.PurchaseOrder, key string) (out stock.PurchaseOrder, duplicate bool, err error)
	// ReceivePurchaseOrder records a receipt of n units (PurchaseOrder.Receive) under the
	// caller's key, one per order: the same key again returns the order with duplicate=true.
	ReceivePurchaseOrder(ctx context.Context, id int64, n stock.Qty, key, operator, remark string) (out stock.PurchaseOrder, duplicate bool, err error)
	// ClosePurchaseOrder closes an order (PurchaseOrder.Close); closing a closed one returns
	// it with duplicate=true.
	ClosePurchaseOrder(ctx context.Context, id int64, operator string) (out stock.PurchaseOrder, duplicate bool, err error)
}

// Reads are the store's queries (and the summary rebuild), outside any use case's transaction.
type Reads interface {
	GetSKU(ctx context.Context, sku string) (stock.SKUStock, error)
	// Ledger returns the rows of a SKU's ledger q picks; ErrUnknownSKU when there is no SKU.
	Ledger(ctx context.Context, sku string, q LedgerQuery) ([]stock.LedgerEntry, error)
	// ListSKUs returns up to limit SKUs named after after, in sku order, whose names start
	// with prefix, each summed over its slots.
	ListSKUs(ctx context.Context, prefix, after string, limit int) ([]stock.SKUStock, error)
	Locks(ctx context.Context, orderID string) ([]*stock.Lock, error)
	GetAdjustment(ctx context.Context, id int64) (stock.Adjustment, error)
	// Adjustments returns the adjustments q picks, newest first.
	Adjustments(ctx context.Context, q AdjustmentQuery) ([]stock.Adjustment, error)
	// GetPurchaseOrder reads a purchase order and its receipts; ErrPurchaseOrderNotFound
	// when there is none.
	GetPurchaseOrder(ctx context.Context, id int64) (stock.PurchaseOrder, error)
	// PurchaseOrders returns up to limit purchase orders of a SKU with id < before (0: any),
	// newest first, with their receipts; ErrUnknownSKU when there is no SKU.
	PurchaseOrders(ctx context.Context, sku string, before int64, limit int) ([]stock.PurchaseOrder, error)
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

// LedgerQuery picks rows of a SKU's ledger, oldest first: up to Limit rows with id > After,
// and of those only the ones every filter that is set matches.
type LedgerQuery struct {
	After        int64
	Limit        int
	Types        []stock.ChangeType // any of these; none: every type
	OrderID      string
	Operator     string
	Since, Until time.Time // created_at in [Since, Until); zero: unbounded
}

// AdjustmentQuery picks adjustments, newest first: up to Limit with id < Before (0: any), in
// State and of SKU when those are set.
type AdjustmentQuery struct {
	State  stock.AdjustmentState
	SKU    string
	Before int64
	Limit  int
}
