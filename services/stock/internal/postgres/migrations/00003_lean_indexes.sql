-- +goose Up
-- Every index is written on every lock; these earn nothing. A ledger row tied to an order
-- already has the unique idempotency key <order>/<sku>/<change type>, so the second unique
-- index on (order_id, sku, change_type) checked the same thing twice. Locks are read by order
-- (the primary key) and by deadline, never by SKU. The ledger is read per SKU in id order.
ALTER TABLE stock_ledger DROP CONSTRAINT stock_ledger_order_id_sku_change_type_key;
DROP INDEX stock_lock_by_sku;
DROP INDEX stock_ledger_by_slot;
CREATE INDEX stock_ledger_by_sku ON stock_ledger (sku, id);

-- +goose Down
DROP INDEX stock_ledger_by_sku;
CREATE INDEX stock_ledger_by_slot ON stock_ledger (sku, slot, id);
CREATE INDEX stock_lock_by_sku ON stock_lock (sku, state);
ALTER TABLE stock_ledger ADD CONSTRAINT stock_ledger_order_id_sku_change_type_key UNIQUE (order_id, sku, change_type);
