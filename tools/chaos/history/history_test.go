package history

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/postgres"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

// migrations is the schema a service's internal/postgres package embeds. Go's internal rule
// keeps tools from importing it, so the test runs the same files from the repository.
func migrations(t *testing.T, service, name string) postgres.Schema {
	dir := filepath.Join("..", "..", "..", "services", service, "internal", "postgres", "migrations")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no %s migrations at %s (tools checked out without the services?): %v", service, dir, err)
	}
	return postgres.Schema{Name: name, FS: os.DirFS(dir)}
}

// ledgerRow is one stock_ledger row the test writes: only what Load reads is varied.
type ledgerRow struct {
	order, sku string
	kind       Kind
	relocked   bool // a sell that leaves locked unchanged
	at         time.Time
}

func insertLedger(t *testing.T, db *pgxpool.Pool, rows ...ledgerRow) {
	ctx := context.Background()
	for i, r := range rows {
		lockedAfter := int64(1)
		if r.relocked {
			lockedAfter = 2
		}
		var order *string
		if r.order != "" {
			order = &r.order
		}
		_, err := db.Exec(ctx, `
			INSERT INTO stock_ledger (sku, change_type, qty, on_hand_before, locked_before, sold_before, incoming_before,
			                          on_hand_after, locked_after, sold_after, incoming_after, order_id, operator,
			                          idempotency_key, created_at)
			VALUES ($1, $2, 1, 10, 2, 0, 0, 10, $3, 1, 0, $4, 'test', $5, $6)`,
			r.sku, string(r.kind), lockedAfter, order, t.Name()+string(rune('a'+i)), r.at)
		require.NoError(t, err, "ledger row %d", i)
	}
}

func insertOrder(t *testing.T, db *pgxpool.Pool, id, status string, created time.Time, skus ...string) {
	ctx := context.Background()
	_, err := db.Exec(ctx, `
		INSERT INTO orders (id, idempotency_key, request_hash, buyer_id, currency, total, payment_timeout_ns,
		                    status, created_at, expires_at, updated_at)
		VALUES ($1, $1, '\x00', 'buyer', 'CNY', 100, 1000000000, $2, $3, $3, $3)`, id, status, created)
	require.NoError(t, err)
	for i, sku := range skus {
		_, err := db.Exec(ctx, `INSERT INTO order_items (order_id, line, sku, qty, unit_price) VALUES ($1, $2, $3, 1, 100)`, id, i, sku)
		require.NoError(t, err)
	}
}

// TestLoad writes a small run into databases migrated with the real stock and order
// migrations and checks what Load reads back, and that Check judges it.
func TestLoad(t *testing.T) {
	stockSchema, orderSchema := migrations(t, "stock", "stock"), migrations(t, "order", "order")
	stockDB, _ := pgtest.New(t, stockSchema)
	orderDB, _ := pgtest.New(t, orderSchema)
	ctx := context.Background()

	_, err := stockDB.Exec(ctx, `INSERT INTO sku (sku) VALUES ('A'), ('B')`)
	require.NoError(t, err)
	since := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	before, during := since.Add(-time.Minute), since.Add(time.Second)
	insertLedger(t, stockDB,
		ledgerRow{order: "old", sku: "A", kind: Lock, at: before},                   // an order before the run …
		ledgerRow{order: "spans", sku: "A", kind: Lock, at: before},                 // … one that spans its start …
		ledgerRow{order: "paid", sku: "A", kind: Lock, at: during},                  // … and orders of the run
		ledgerRow{order: "late", sku: "A", kind: Lock, at: during},                  //
		ledgerRow{sku: "A", kind: "manual_adjust", at: during},                      // no order: no lock's step
		ledgerRow{order: "spans", sku: "A", kind: ReleaseTimeout, at: during},       //
		ledgerRow{order: "paid", sku: "A", kind: Sell, at: during},                  //
		ledgerRow{order: "late", sku: "A", kind: ReleaseCancel, at: during},         //
		ledgerRow{order: "late", sku: "A", kind: Sell, relocked: true, at: during},  // a late payment re-locked
		ledgerRow{order: "other-sku", sku: "B", kind: Lock, at: during},             // another SKU
		ledgerRow{order: "ghost", sku: "A", kind: Lock, at: during},                 // unknown to the order service
		ledgerRow{order: "paid", sku: "B", kind: Lock, at: during.Add(time.Second)}, // the order's other line
	)
	insertOrder(t, orderDB, "old", "awaiting_payment", before, "A")
	insertOrder(t, orderDB, "spans", "closed", before, "A")
	insertOrder(t, orderDB, "paid", "paid", during, "A", "B")
	insertOrder(t, orderDB, "late", "paid", during, "A")
	insertOrder(t, orderDB, "other-sku", "awaiting_payment", during, "B")
	insertOrder(t, orderDB, "rejected", "rejected", during, "A") // never locked: only in orders
	insertOrder(t, orderDB, "rejected-b", "rejected", during, "B")

	type seen struct {
		Order, SKU string
		Kind       Kind
		Relocked   bool
		Status     string
	}
	project := func(ops []Op) []seen {
		out := make([]seen, len(ops))
		for i, o := range ops {
			out[i] = seen{o.OrderID, o.SKU, o.Kind, o.Relocked, o.Status}
			if o.Kind != ReadStatus {
				assert.Equal(t, o.Call, o.Return, "a ledger row is an instant")
				assert.Positive(t, o.Seq)
			}
		}
		return out
	}

	ops, err := Load(ctx, stockDB, orderDB, Filter{Since: since, SKUs: []string{"A"}})
	require.NoError(t, err)
	assert.Equal(t, []seen{
		{"spans", "A", Lock, false, ""}, // read from before Since: the order's history starts at its lock
		{"paid", "A", Lock, false, ""},
		{"late", "A", Lock, false, ""},
		{"spans", "A", ReleaseTimeout, false, ""},
		{"paid", "A", Sell, false, ""},
		{"late", "A", ReleaseCancel, false, ""},
		{"late", "A", Sell, true, ""},
		{"ghost", "A", Lock, false, ""},
		{"late", "", ReadStatus, false, "paid"},
		{"paid", "", ReadStatus, false, "paid"},
		{"rejected", "", ReadStatus, false, "rejected"},
		{"spans", "", ReadStatus, false, "closed"},
		{"ghost", "", ReadStatus, false, ""},
	}, project(ops))

	res := Check(ops)
	assert.False(t, res.OK)
	assert.Equal(t, 5, res.Orders)
	require.Len(t, res.Failures, 1, "%s", res)
	assert.Equal(t, "ghost", res.Failures[0].OrderID)

	all, err := Load(ctx, stockDB, orderDB, Filter{})
	require.NoError(t, err)
	assert.Len(t, all, 11+8, "every order-linked row, a read of every order and of ghost")
	res = Check(all)
	require.Len(t, res.Failures, 2, "%s", res)
	assert.Equal(t, "ghost", res.Failures[0].OrderID)
	assert.Equal(t, "paid", res.Failures[1].OrderID, "its line B is only locked")
}
