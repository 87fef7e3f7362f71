-- +goose Up
-- The sales terms of each SKU (docs/decisions/0004-prices-in-order.md): every order line is
-- priced from here, never from the request. A SKU without a row is not for sale.
-- payment_window_ns is the SKU's own payment window (a promotion's 10 min); NULL: the
-- service's default (ORDER_PAYMENT_WINDOW).
CREATE TABLE sku_price (
    sku               text        PRIMARY KEY CHECK (length(sku) BETWEEN 1 AND 64),
    unit_price        bigint      NOT NULL CHECK (unit_price > 0),
    currency          text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    payment_window_ns bigint      CHECK (payment_window_ns > 0),
    updated_at        timestamptz NOT NULL,
    updated_by        text        NOT NULL CHECK (length(updated_by) BETWEEN 1 AND 128)
);

-- +goose Down
DROP TABLE sku_price;
