-- +goose Up
-- Purchase orders: units of a SKU ordered from a supplier, received in parts. Placing one
-- raises incoming (purchase_expected), each receipt moves units from incoming to on_hand
-- (purchase_inbound), closing it takes what never arrived out of incoming (purchase_cancelled).
-- The ledger rows say which order they belong to in their remark ("purchase order 12: …"), so
-- the hot ledger table gets no column and no index; purchase_order_receipt links an order to
-- its receipt rows for reading them back.
CREATE TABLE purchase_order (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku             text NOT NULL REFERENCES sku (sku),
    expected        bigint NOT NULL CHECK (expected > 0),
    received        bigint NOT NULL DEFAULT 0 CHECK (received >= 0 AND received <= expected),
    remark          text NOT NULL DEFAULT '',
    created_by      text NOT NULL,
    idempotency_key text NOT NULL UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now(),
    closed_by       text,
    closed_at       timestamptz,
    CHECK ((closed_by IS NULL) = (closed_at IS NULL))
);
CREATE INDEX purchase_order_by_sku ON purchase_order (sku, id);

CREATE TABLE purchase_order_receipt (
    purchase_order_id bigint NOT NULL REFERENCES purchase_order (id),
    ledger_id         bigint NOT NULL UNIQUE REFERENCES stock_ledger (id),
    remark            text NOT NULL DEFAULT '', -- the receipt's own; the ledger row's adds the order's id
    PRIMARY KEY (purchase_order_id, ledger_id)
);

-- purchase_cancelled joins the change types. The new check is added NOT VALID: every row
-- there passed the narrower check it replaces, so the ledger is not scanned again while the
-- table is locked (a sale would wait on it); new rows are checked as before.
ALTER TABLE stock_ledger DROP CONSTRAINT stock_ledger_change_type_check;
ALTER TABLE stock_ledger ADD CONSTRAINT stock_ledger_change_type_check CHECK (change_type IN ('lock', 'sell',
    'release_timeout', 'release_cancel', 'refund_restock', 'ship', 'purchase_expected', 'purchase_inbound',
    'purchase_cancelled', 'manual_adjust', 'stocktake', 'rebalance')) NOT VALID;

-- +goose Down
-- purchase_cancelled rows cannot be deleted (the ledger is append-only): the old check is put
-- back NOT VALID, so they stay and no new one is written.
ALTER TABLE stock_ledger DROP CONSTRAINT stock_ledger_change_type_check;
ALTER TABLE stock_ledger ADD CONSTRAINT stock_ledger_change_type_check CHECK (change_type IN ('lock', 'sell',
    'release_timeout', 'release_cancel', 'refund_restock', 'ship', 'purchase_expected', 'purchase_inbound',
    'manual_adjust', 'stocktake', 'rebalance')) NOT VALID;
DROP TABLE purchase_order_receipt;
DROP TABLE purchase_order;
