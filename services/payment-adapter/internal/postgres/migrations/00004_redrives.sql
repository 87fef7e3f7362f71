-- +goose Up
-- The paid_not_sold job re-publishes a payment's payment.succeeded at most once per
-- RECONCILE_PAID_NOT_SOLD_AGE while stock has not sold its order: redrives counts the copies,
-- redriven_at is when the last one went out. Expand only: an older payment-adapter leaves
-- them at 0 and NULL.
ALTER TABLE payments
    ADD COLUMN redrives    integer NOT NULL DEFAULT 0 CHECK (redrives >= 0),
    ADD COLUMN redriven_at timestamptz,
    ADD CONSTRAINT payments_redriven CHECK ((redrives = 0) = (redriven_at IS NULL));

-- +goose Down
ALTER TABLE payments DROP COLUMN redriven_at, DROP COLUMN redrives;
