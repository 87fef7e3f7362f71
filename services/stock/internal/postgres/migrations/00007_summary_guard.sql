-- +goose Up
-- The guard of a batch's summary update, raised by the database: a guarded UPDATE of the slot
-- rows that matched fewer rows than it moves fails its statement, so a transaction that sends
-- its last writes with its COMMIT (postgres.InTxBatch) never commits a refused move. The SKUs
-- of the update go in the error's detail, space-separated (a SKU holds no space).
-- +goose StatementBegin
CREATE FUNCTION stock_summary_guard(matched bigint, moves bigint, skus text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF matched <> moves THEN
        RAISE EXCEPTION 'move % slots: % rows matched the guard; summaries changed under a row lock', moves, matched
            USING ERRCODE = 'check_violation', CONSTRAINT = 'summary_guard', DETAIL = array_to_string(skus, ' ');
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION stock_summary_guard;
