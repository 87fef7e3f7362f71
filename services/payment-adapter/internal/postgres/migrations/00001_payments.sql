-- +goose Up
-- payment-adapter's copy of what each order must be paid, from order.created: a callback's
-- amount and currency are checked against it.
CREATE TABLE order_totals (
    order_id   text        PRIMARY KEY,
    total      bigint      NOT NULL CHECK (total >= 0),
    currency   text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per provider transaction. (provider, provider_txn_id) is unique: a repeated
-- notification finds its row and changes nothing. A payment is succeeded, failed (with a
-- reason) or refunded (with its one refund); only succeeded → refunded ever happens.
CREATE TABLE payments (
    payment_id         text        PRIMARY KEY,
    provider           text        NOT NULL CHECK (length(provider) BETWEEN 1 AND 32),
    provider_txn_id    text        NOT NULL CHECK (length(provider_txn_id) BETWEEN 1 AND 128),
    order_id           text        NOT NULL REFERENCES order_totals (order_id),
    amount             bigint      NOT NULL CHECK (amount > 0),
    currency           text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status             text        NOT NULL CHECK (status IN ('succeeded', 'failed', 'refunded')),
    failure_reason     text,
    refund_id          text        UNIQUE,
    provider_refund_id text,
    refund_reason      text,
    refunded_at        timestamptz,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    UNIQUE (provider, provider_txn_id),
    CHECK ((status = 'failed') = (failure_reason IS NOT NULL)),
    CHECK ((status = 'refunded') = (refund_id IS NOT NULL AND refunded_at IS NOT NULL))
);

CREATE INDEX payments_order ON payments (order_id, created_at);

-- +goose Down
DROP TABLE payments;
DROP TABLE order_totals;
