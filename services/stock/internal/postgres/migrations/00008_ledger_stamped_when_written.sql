-- +goose Up
-- A ledger row is stamped when its statement runs, not when its transaction began. A combined
-- batch begins, locks its rows, and only then decides in Go whether a timeout is due; stamped
-- with the BEGIN's time, a release decided just after its deadline read as made before it (the
-- chaos run's "no lock released before its deadline" saw one 3 ms early). The same for the
-- time a lock resolves.
ALTER TABLE stock_ledger ALTER COLUMN created_at SET DEFAULT statement_timestamp();

-- +goose Down
ALTER TABLE stock_ledger ALTER COLUMN created_at SET DEFAULT now();
