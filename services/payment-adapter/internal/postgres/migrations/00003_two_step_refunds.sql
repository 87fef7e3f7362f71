-- +goose Up
-- Refunds in two steps (docs/payments.md): the request is recorded with the payment (and an
-- outbox payment.refund_requested in the same transaction); the provider is asked outside any
-- transaction, and its answer — at once, by a refund notification, or by the unconfirmed
-- refunds job's query — completes it. refund_status is where the one refund of a payment
-- stands: requested (the provider not asked yet, or its answer unknown), pending (accepted by
-- the provider, the money not back yet), succeeded (the payment is refunded) or failed (the
-- provider will not pay it back: for a human). refunded_at stays the time the money was back.
--
-- Expand only: every new column is nullable or defaulted, and the checks hold for the rows an
-- older payment-adapter writes during a rollout (status refunded with refund_id and
-- refunded_at, refund_status NULL: read as succeeded).
ALTER TABLE payments
    ADD COLUMN refund_status          text CHECK (refund_status IN ('requested', 'pending', 'succeeded', 'failed')),
    ADD COLUMN refund_attempts        integer NOT NULL DEFAULT 0 CHECK (refund_attempts >= 0),
    ADD COLUMN refund_next_attempt_at timestamptz,
    ADD COLUMN refund_last_error      text,
    ADD COLUMN refund_requested_at    timestamptz;

UPDATE payments SET refund_status = 'succeeded', refund_requested_at = refunded_at WHERE status = 'refunded';

ALTER TABLE payments
    ADD CONSTRAINT payments_refund_requested CHECK (refund_status IS NULL OR (refund_id IS NOT NULL AND refund_requested_at IS NOT NULL)),
    ADD CONSTRAINT payments_refund_succeeded CHECK (refund_status IS DISTINCT FROM 'succeeded' OR status = 'refunded'),
    ADD CONSTRAINT payments_refunded_status CHECK (status <> 'refunded' OR refund_status IS NULL OR refund_status = 'succeeded'),
    -- Only money taken can be refunded: a succeeded payment, or one captured for the wrong
    -- amount or currency.
    ADD CONSTRAINT payments_refund_of_money CHECK (refund_status IS NULL OR status <> 'failed'
        OR failure_reason IN ('amount_mismatch', 'currency_mismatch'));

-- The unconfirmed refunds job reads the refunds still open, and the failed ones.
CREATE INDEX payments_refunds_open ON payments (refund_requested_at) WHERE refund_status IN ('requested', 'pending', 'failed');

-- The lost callbacks job asks providers about orders still unpaid before their deadline: the
-- deadline from order.created (NULL for orders remembered before this column).
ALTER TABLE order_totals ADD COLUMN payment_deadline timestamptz;
CREATE INDEX order_totals_created ON order_totals (created_at);

-- +goose Down
DROP INDEX order_totals_created;
ALTER TABLE order_totals DROP COLUMN payment_deadline;
DROP INDEX payments_refunds_open;
ALTER TABLE payments
    DROP CONSTRAINT payments_refund_of_money,
    DROP CONSTRAINT payments_refunded_status,
    DROP CONSTRAINT payments_refund_succeeded,
    DROP CONSTRAINT payments_refund_requested,
    DROP COLUMN refund_requested_at,
    DROP COLUMN refund_last_error,
    DROP COLUMN refund_next_attempt_at,
    DROP COLUMN refund_attempts,
    DROP COLUMN refund_status;
