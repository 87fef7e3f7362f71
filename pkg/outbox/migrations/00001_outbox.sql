-- +goose Up
-- One row per event to publish, written in the same transaction as the state change it
-- announces. txid is the writing transaction's id: the relay only reads rows whose
-- transaction is older than every transaction still running (pg_snapshot_xmin), so a row of a
-- long-open transaction is never overtaken and then forgotten.
CREATE TABLE outbox (
    id           bigserial   PRIMARY KEY,
    event_id     text        NOT NULL UNIQUE,
    subject      text        NOT NULL,
    data         bytea       NOT NULL,
    headers      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    txid         xid8        NOT NULL DEFAULT pg_current_xact_id(),
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);

-- The relay's work queue, in commit-safe order.
CREATE INDEX outbox_pending ON outbox (txid, id) WHERE published_at IS NULL;
-- Retention cleanup of published rows.
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;

-- Wake the relay when rows commit: NOTIFY is delivered at commit, never for a rollback.
-- +goose StatementBegin
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- +goose Down
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION outbox_notify();
DROP TABLE outbox;
