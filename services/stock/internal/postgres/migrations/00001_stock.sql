-- +goose Up
-- The summary of each SKU. The database, not only the code, holds the invariants:
-- available = on_hand - locked - sold, and no figure below zero.
CREATE TABLE sku_stock (
    sku        text PRIMARY KEY CHECK (sku ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$'),
    on_hand    bigint NOT NULL DEFAULT 0 CHECK (on_hand >= 0),
    available  bigint NOT NULL DEFAULT 0 CHECK (available >= 0),
    locked     bigint NOT NULL DEFAULT 0 CHECK (locked >= 0),
    sold       bigint NOT NULL DEFAULT 0 CHECK (sold >= 0),
    incoming   bigint NOT NULL DEFAULT 0 CHECK (incoming >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT available_derived CHECK (available = on_hand - locked - sold)
);

-- The first outcome of an order's lock request: a replayed order.created returns it.
CREATE TABLE order_lock (
    order_id      text PRIMARY KEY,
    outcome       text NOT NULL CHECK (outcome IN ('locked', 'rejected')),
    reject_reason text,
    reject_sku    text,
    payment_id    text,        -- the payment that sold the order's locks
    deadline      timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- One reservation per (order, SKU); it resolves at most once.
CREATE TABLE stock_lock (
    order_id    text NOT NULL REFERENCES order_lock (order_id),
    sku         text NOT NULL REFERENCES sku_stock (sku),
    qty         bigint NOT NULL CHECK (qty > 0),
    state       text NOT NULL CHECK (state IN ('locked', 'sold', 'released', 'shipped', 'refunded')),
    deadline    timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    PRIMARY KEY (order_id, sku)
);
CREATE INDEX stock_lock_held_by_deadline ON stock_lock (deadline) WHERE state = 'locked';
CREATE INDEX stock_lock_by_sku ON stock_lock (sku, state);

-- The ledger: one row per movement, append-only. Before/after hold every figure, so the fold
-- of a SKU's rows is its summary and any row can be audited alone.
CREATE TABLE stock_ledger (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku              text NOT NULL REFERENCES sku_stock (sku),
    change_type      text NOT NULL CHECK (change_type IN ('lock', 'sell', 'release_timeout', 'release_cancel',
                         'refund_restock', 'ship', 'purchase_expected', 'purchase_inbound', 'manual_adjust', 'stocktake')),
    qty              bigint NOT NULL CHECK (qty > 0),
    on_hand_before   bigint NOT NULL,
    locked_before    bigint NOT NULL,
    sold_before      bigint NOT NULL,
    incoming_before  bigint NOT NULL,
    available_before bigint GENERATED ALWAYS AS (on_hand_before - locked_before - sold_before) STORED,
    on_hand_after    bigint NOT NULL,
    locked_after     bigint NOT NULL,
    sold_after       bigint NOT NULL,
    incoming_after   bigint NOT NULL,
    available_after  bigint GENERATED ALWAYS AS (on_hand_after - locked_after - sold_after) STORED,
    order_id         text,
    operator         text NOT NULL,
    remark           text NOT NULL DEFAULT '',
    idempotency_key  text NOT NULL UNIQUE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (order_id, sku, change_type)
);
CREATE INDEX stock_ledger_by_sku ON stock_ledger (sku, id);

-- +goose StatementBegin
CREATE FUNCTION stock_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'stock_ledger is append-only: % refused; correct a row with a reversing row', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER stock_ledger_no_update_delete BEFORE UPDATE OR DELETE ON stock_ledger
    FOR EACH ROW EXECUTE FUNCTION stock_ledger_append_only();
CREATE TRIGGER stock_ledger_no_truncate BEFORE TRUNCATE ON stock_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION stock_ledger_append_only();

-- Adjustment orders: an operator asks, a second operator approves, only then stock moves.
CREATE TABLE adjustment (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku          text NOT NULL REFERENCES sku_stock (sku),
    kind         text NOT NULL CHECK (kind IN ('manual_adjust', 'stocktake')),
    delta        bigint,   -- manual_adjust: signed change of on_hand
    counted      bigint,   -- stocktake: the counted on_hand
    reason       text NOT NULL,
    requested_by text NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'rejected')),
    decided_by   text,
    decided_at   timestamptz,
    ledger_id    bigint REFERENCES stock_ledger (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'manual_adjust' AND delta IS NOT NULL AND delta <> 0 AND counted IS NULL)
        OR (kind = 'stocktake' AND counted IS NOT NULL AND counted >= 0 AND delta IS NULL))
);

-- +goose Down
DROP TABLE adjustment;
DROP TABLE stock_ledger;
DROP FUNCTION stock_ledger_append_only;
DROP TABLE stock_lock;
DROP TABLE order_lock;
DROP TABLE sku_stock;
