-- +goose Up
-- One row per order. The idempotency key of the request that created it is unique: a retried
-- POST finds its order instead of creating a second one, and request_hash (SHA-256 of the
-- canonical request) tells a true retry from a reused key.
CREATE TABLE orders (
    id                  text        PRIMARY KEY,
    idempotency_key     text        NOT NULL UNIQUE CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    request_hash        bytea       NOT NULL,
    buyer_id            text        NOT NULL CHECK (length(buyer_id) BETWEEN 1 AND 128),
    currency            text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    total               bigint      NOT NULL CHECK (total >= 0),
    payment_timeout_ns  bigint      NOT NULL CHECK (payment_timeout_ns > 0),
    status              text        NOT NULL CHECK (status IN ('pending', 'awaiting_payment', 'rejected', 'paid',
                                        'closed', 'cancelled', 'shipped', 'refund_pending', 'refunded')),
    created_at          timestamptz NOT NULL,
    expires_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    cancel_requested_at timestamptz
);

CREATE INDEX orders_buyer ON orders (buyer_id, created_at DESC);
-- Reconciliation looks for orders stuck in a non-terminal status.
CREATE INDEX orders_open ON orders (status, updated_at)
    WHERE status IN ('pending', 'awaiting_payment', 'paid', 'refund_pending');

-- The lines of an order, fixed at creation.
CREATE TABLE order_items (
    order_id   text   NOT NULL REFERENCES orders (id),
    line       int    NOT NULL CHECK (line >= 0),
    sku        text   NOT NULL CHECK (length(sku) BETWEEN 1 AND 64),
    qty        bigint NOT NULL CHECK (qty BETWEEN 1 AND 10000),
    unit_price bigint NOT NULL CHECK (unit_price >= 0),
    PRIMARY KEY (order_id, line),
    UNIQUE (order_id, sku)
);

-- Every step of every order, append-only like the stock ledger.
CREATE TABLE order_history (
    order_id text        NOT NULL REFERENCES orders (id),
    seq      int         NOT NULL CHECK (seq >= 0),
    status   text        NOT NULL,
    reason   text        NOT NULL,
    at       timestamptz NOT NULL,
    PRIMARY KEY (order_id, seq)
);

-- +goose StatementBegin
CREATE FUNCTION order_history_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'order_history is append-only: % refused', TG_OP;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER order_history_append_only BEFORE UPDATE OR DELETE ON order_history
    FOR EACH ROW EXECUTE FUNCTION order_history_append_only();

-- +goose Down
DROP TRIGGER order_history_append_only ON order_history;
DROP FUNCTION order_history_append_only();
DROP TABLE order_history;
DROP TABLE order_items;
DROP TABLE orders;
