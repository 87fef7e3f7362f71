-- +goose Up
-- One row per replay of a dead letter (GET/POST /v1/admin/deadletters): who replayed which
-- DEADLETTER message and whether the consumer's handler succeeded. A dead letter with a 'done'
-- replay is no longer listed as pending; the inbox, not this table, makes a second replay
-- change nothing. The original's stream, sequence and consumer are kept beside the DEADLETTER
-- sequence, so a DEADLETTER stream recreated from sequence 1 is not mistaken for the old one.
CREATE TABLE deadletter_replay (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dl_seq      bigint      NOT NULL,
    stream      text        NOT NULL,
    stream_seq  bigint      NOT NULL,
    consumer    text        NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('done', 'failed')),
    error       text        NOT NULL DEFAULT '',
    replayed_by text        NOT NULL,
    replayed_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX deadletter_replay_by_seq ON deadletter_replay (dl_seq, id);

-- +goose Down
DROP TABLE deadletter_replay;
