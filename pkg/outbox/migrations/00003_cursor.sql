-- +goose Up
-- The relay no longer marks each row it publishes: marking was an update per row that could
-- never be HOT (published_at is in both partial indexes), three B-tree inserts and a dead row
-- version each, about a sixth of PostgreSQL's time per order (docs/performance.md). It keeps
-- its place instead: every row at or below (txid, id) in the relay's order is published,
-- except the rows in outbox_retry. The relay reads only rows whose transaction is older than
-- every one still running (relay.go, horizon), so no row can appear below the cursor later.
--
-- Expand only: published_at and its indexes stay for relays of earlier releases, which still
-- mark what they publish and read the rows whose published_at is NULL; the relay of this
-- release skips rows they marked. Mixed, both publish the rows the other has not marked, and
-- JetStream's duplicate window drops the second copy. Rolling back to a release before this
-- one: first mark the published rows, or its relay publishes them again (docs/releasing.md).
CREATE TABLE outbox_cursor (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    txid     xid8    NOT NULL,
    id       bigint  NOT NULL
);
-- (0, 0): the first pass reads every row not marked published, as relays before it did.
INSERT INTO outbox_cursor (txid, id) VALUES ('0', 0);

-- Rows at or below the cursor that JetStream refused: tried again first on every pass, so one
-- that is refused every time holds back nothing behind it (review F17).
CREATE TABLE outbox_retry (
    id bigint PRIMARY KEY REFERENCES outbox (id) ON DELETE CASCADE
);

-- What is not published yet, for the backlog gauges and the outbox reconcile job. Written so
-- the planner reads from the cursor on in outbox_pending, and from outbox_retry into outbox
-- (OFFSET 0 keeps the join in that order), never the published rows kept for retention.
CREATE VIEW outbox_unpublished AS
    SELECT o.* FROM outbox o
     WHERE o.published_at IS NULL AND (o.txid, o.id) > (SELECT c.txid, c.id FROM outbox_cursor c)
    UNION ALL
    SELECT o.* FROM outbox_retry r,
           LATERAL (SELECT * FROM outbox o WHERE o.id = r.id AND o.published_at IS NULL OFFSET 0) o;

-- +goose Down
DROP VIEW outbox_unpublished;
DROP TABLE outbox_retry;
DROP TABLE outbox_cursor;
