-- +goose Up
-- A stocktake is a count taken at a point in the ledger: when it is filed, the SKU's last
-- ledger row and its book on_hand then are recorded, and approval moves on_hand by counted
-- minus that book figure, so the movements between the count and the approval (a shipment, a
-- receipt) are kept instead of overwritten. Stocktakes filed before this have no point (NULL)
-- and are refused at approval: count again.
ALTER TABLE adjustment ADD COLUMN counted_at_ledger_id bigint CHECK (counted_at_ledger_id >= 0),
                       ADD COLUMN book_on_hand bigint CHECK (book_on_hand >= 0);
ALTER TABLE adjustment ADD CONSTRAINT adjustment_ledger_point CHECK (
    (counted_at_ledger_id IS NULL) = (book_on_hand IS NULL) AND (kind = 'stocktake' OR counted_at_ledger_id IS NULL));

-- +goose Down
ALTER TABLE adjustment DROP CONSTRAINT adjustment_ledger_point;
ALTER TABLE adjustment DROP COLUMN counted_at_ledger_id, DROP COLUMN book_on_hand;
