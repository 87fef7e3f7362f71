-- +goose Up
-- The W3C traceparent of the stock.locked that scheduled the deadline: an expiry the sweeper
-- makes (no fired message to carry it) continues the order's trace with it.
ALTER TABLE deadlines ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE deadlines DROP COLUMN traceparent;
