-- +goose Up
-- One row per reconciliation run (scheduled, API or CLI): what it checked, what it found and
-- what it repaired, with every finding, for later reading (GET /v1/admin/reconcile/runs).
CREATE TABLE reconcile_run (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job      text        NOT NULL,
    mode     text        NOT NULL CHECK (mode IN ('check', 'repair')),
    trigger  text        NOT NULL,
    started  timestamptz NOT NULL,
    finished timestamptz,
    checked  int         NOT NULL DEFAULT 0,
    found    int         NOT NULL DEFAULT 0,
    repaired int         NOT NULL DEFAULT 0,
    findings jsonb       NOT NULL DEFAULT '[]'::jsonb,
    error    text        NOT NULL DEFAULT ''
);

CREATE INDEX reconcile_run_by_job ON reconcile_run (job, id DESC);

-- +goose Down
DROP TABLE reconcile_run;
