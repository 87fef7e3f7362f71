-- +goose Up
-- The SKUs the flash-sale gate should hold in Redis, and from when: the gate job arms a SKU
-- once arm_at has passed (and again whenever Redis has lost it) and disarms what is not here.
CREATE TABLE sku_gate (
    sku        text        PRIMARY KEY,
    arm_at     timestamptz NOT NULL,
    armed_by   text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE sku_gate;
