// Package history checks what a chaos run did to each order's stock locks against the
// sequential model of one order's locks (DESIGN §3), with porcupine.
//
// What is checked, per order:
//   - every lock, sell, release and refund the stock service applied (one stock_ledger row
//     each) is a legal step of the lock of its (order, SKU): none → locked by lock; locked →
//     sold by sell; locked → released by release_timeout or release_cancel; released → sold by
//     a late payment's sell, which re-locks (its row leaves locked unchanged); sold → shipped
//     by ship; sold or shipped → refunded by refund_restock. Anything else — a second lock or
//     release, a sell after a sell, a release after a sale, a refund of something not sold,
//     a re-locking sell of a held lock — is a violation: a lock resolves at most once;
//   - the order service's final status agrees with the locks the ledger left (paid ↔ sold,
//     closed ↔ released, rejected ↔ never locked, …; see the table in check.go);
//   - optionally, the client's acknowledged payments: an order whose payment the payment
//     adapter acknowledged must end paid, shipped or refunded (refund_pending), never closed,
//     cancelled or rejected with the money kept.
//
// Why porcupine: the operations of one order come from three places with three clocks — the
// ledger (ordered by row id), the client (wall-clock intervals) and a final read of the order
// service — and a client's payment reaches stock asynchronously, so where it takes effect
// among the ledger rows is unknown. Porcupine asks the right question for that: is there an
// order of the operations, consistent with what is known to precede what, that the sequential
// model accepts (linearizability)? It checks each order as its own partition, and for a
// failed order gives the longest prefix that fits and an HTML visualization of it. Within one
// lock the ledger rows are totally ordered, so for them the search is a replay; a created_at
// is not used to order them, because it is the writing transaction's start time, which in a
// batched transaction can precede the commit of the row it depends on. See [Check].
//
// The check assumes a settled system: call [Load] after the run has finished and every event
// has been consumed (a stock.sold still in flight makes a paid order look awaiting_payment).
package history

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Kind names an operation: a ledger change type, the final read of an order, or a client call.
type Kind string

// The stock operations: the change types of stock_ledger rows that carry an order id.
const (
	Lock           Kind = "lock"
	Sell           Kind = "sell"
	ReleaseTimeout Kind = "release_timeout"
	ReleaseCancel  Kind = "release_cancel"
	Ship           Kind = "ship"
	RefundRestock  Kind = "refund_restock"
)

// The other operations.
const (
	// ReadStatus is the order service's status of the order, read after the run.
	ReadStatus Kind = "read_status"
	// PayAcked is a payment of the order that the payment adapter acknowledged to the client
	// (a 2xx for its callback). Add one only for an acknowledged payment: a payment whose
	// outcome the client does not know may or may not have happened, and adds nothing.
	PayAcked Kind = "pay_acked"
)

// Op is one operation of the history of an order.
type Op struct {
	OrderID string
	Kind    Kind
	// SKU is the lock's SKU, for stock operations.
	SKU string
	// Relocked marks a sell that took released stock again (a late payment): its ledger row
	// leaves locked unchanged. A sell without it must find the lock held.
	Relocked bool
	// Status is what ReadStatus read: the orders.status, or "" when the order service has no
	// such order.
	Status string
	// Seq orders the stock operations of an order: their stock_ledger id. Stock operations
	// with equal Seq keep their order in the slice given to Check.
	Seq int64
	// Call and Return are when the operation began and ended: a ledger row's created_at
	// (both), a client call's interval, the time of a read. They are shown in failure
	// descriptions; Check orders stock operations by Seq and places client operations
	// anywhere before the read (see the package comment).
	Call, Return time.Time
}

// Filter narrows what Load reads; the zero Filter reads everything.
type Filter struct {
	// Since keeps the orders with a ledger row, or created, at or after Since. Every ledger
	// row of a kept order is read, also the older ones: its history must start at its lock.
	Since time.Time
	// SKUs keeps only the ledger rows of these SKUs, and the orders created since Since that
	// have a line of one of them. Empty: every SKU.
	SKUs []string
}

// ledgerQuery reads every order-linked ledger row of the orders touched since $1 (only SKUs
// in $2, when $2 is not empty), in id order. Rows without an order (purchases, adjustments,
// stocktakes, rebalances) are no step of any lock.
const ledgerQuery = `
SELECT id, order_id, sku, change_type, locked_before = locked_after, created_at
  FROM stock_ledger
 WHERE order_id IN (SELECT order_id FROM stock_ledger
                     WHERE order_id IS NOT NULL AND created_at >= $1
                       AND (cardinality($2::text[]) = 0 OR sku = ANY ($2)))
   AND (cardinality($2::text[]) = 0 OR sku = ANY ($2))
 ORDER BY id`

// ordersQuery reads the status of the orders in $1 and of those created since $2 with a line
// of a SKU in $3 (any SKU when $3 is empty).
const ordersQuery = `
SELECT id, status
  FROM orders o
 WHERE id = ANY ($1)
    OR (created_at >= $2 AND (cardinality($3::text[]) = 0
        OR EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.id AND i.sku = ANY ($3))))
 ORDER BY id`

// Load reads the history of a run: one Op per order-linked stock_ledger row of stockDB, in id
// order, then one ReadStatus per order from orderDB — every order the ledger names (Status ""
// when orderDB has no such order) and every order created since f.Since (with a line of one
// of f.SKUs, when given), which may never have locked anything. The ledger is read in one
// statement (one snapshot); the orders after it.
func Load(ctx context.Context, stockDB, orderDB *pgxpool.Pool, f Filter) ([]Op, error) {
	skus := f.SKUs
	if skus == nil {
		skus = []string{} // NULL would make cardinality() NULL and keep nothing
	}
	rows, err := stockDB.Query(ctx, ledgerQuery, f.Since, skus)
	if err != nil {
		return nil, fmt.Errorf("load ledger: %w", err)
	}
	ops, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Op, error) {
		var op Op
		var kind string
		var lockedSame bool
		err := row.Scan(&op.Seq, &op.OrderID, &op.SKU, &kind, &lockedSame, &op.Call)
		op.Kind, op.Return = Kind(kind), op.Call
		op.Relocked = op.Kind == Sell && lockedSame
		return op, err
	})
	if err != nil {
		return nil, fmt.Errorf("load ledger: %w", err)
	}

	var ids []string
	seen := make(map[string]bool)
	for _, op := range ops {
		if !seen[op.OrderID] {
			seen[op.OrderID] = true
			ids = append(ids, op.OrderID)
		}
	}
	rows, err = orderDB.Query(ctx, ordersQuery, ids, f.Since, skus)
	if err != nil {
		return nil, fmt.Errorf("load orders: %w", err)
	}
	reads, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Op, error) {
		op := Op{Kind: ReadStatus}
		return op, row.Scan(&op.OrderID, &op.Status)
	})
	if err != nil {
		return nil, fmt.Errorf("load orders: %w", err)
	}
	at := time.Now()
	for _, r := range reads {
		delete(seen, r.OrderID)
	}
	for _, id := range ids {
		if seen[id] { // locked by stock, unknown to the order service
			reads = append(reads, Op{OrderID: id, Kind: ReadStatus})
		}
	}
	for i := range reads {
		reads[i].Call, reads[i].Return = at, at
	}
	return append(ops, reads...), nil
}
