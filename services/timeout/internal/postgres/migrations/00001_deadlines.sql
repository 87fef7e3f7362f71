-- +goose Up
-- One row per order: its payment deadline, the authority behind the scheduled message that
-- fires at it. A deadline resolves once: expired (the deadline passed first) or cancelled
-- (stock sold or released the order first). A row cancelled before its stock.locked arrived
-- has no deadline, and keeps that late lock from scheduling anything.
CREATE TABLE deadlines (
    order_id   text        PRIMARY KEY CHECK (length(order_id) BETWEEN 1 AND 128),
    deadline   timestamptz,
    state      text        NOT NULL CHECK (state IN ('scheduled', 'expired', 'cancelled')),
    resolution text        CHECK (resolution IN ('timeout', 'sold', 'released')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CHECK (deadline IS NOT NULL OR state = 'cancelled'),
    CHECK ((state = 'scheduled') = (resolution IS NULL)),
    CHECK ((state = 'expired') = (resolution IS NOT DISTINCT FROM 'timeout'))
);

-- The sweeper's work queue: scheduled deadlines by time.
CREATE INDEX deadlines_due ON deadlines (deadline) WHERE state = 'scheduled';

-- +goose Down
DROP TABLE deadlines;
