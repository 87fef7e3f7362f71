-- +goose Up
-- One row per message a consumer has processed, written in the same transaction as the
-- message's effect: a redelivery finds its row and is acknowledged without redoing the effect.
CREATE TABLE inbox (
    consumer     text        NOT NULL,
    message_id   text        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);

CREATE INDEX inbox_processed_at ON inbox (processed_at);

-- +goose Down
DROP TABLE inbox;
