-- +goose Up
-- The W3C traceparent of the order.created that brought the order: a provider's callback
-- starts a trace of its own, and links it to the order's with this.
ALTER TABLE order_totals ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE order_totals DROP COLUMN traceparent;
