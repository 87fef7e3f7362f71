-- +goose Up
-- Slots (DESIGN §7): a hot SKU's stock split into rows of sku_stock that lock independently.
-- The sku table names each SKU and how many slots take new locks; sku_stock holds one row per
-- slot, and a SKU's figures are the sums over its slots. Slots at or above `slots` (after a
-- reduction) take no new locks; they keep their locked and sold units until those resolve.
CREATE TABLE sku (
    sku        text PRIMARY KEY,
    slots      int NOT NULL DEFAULT 1 CHECK (slots BETWEEN 1 AND 64),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO sku (sku, created_at) SELECT sku, created_at FROM sku_stock;

ALTER TABLE stock_lock DROP CONSTRAINT stock_lock_sku_fkey;
ALTER TABLE stock_ledger DROP CONSTRAINT stock_ledger_sku_fkey;
ALTER TABLE adjustment DROP CONSTRAINT adjustment_sku_fkey;
ALTER TABLE sku_stock DROP CONSTRAINT sku_stock_pkey;

ALTER TABLE sku_stock ADD COLUMN slot int NOT NULL DEFAULT 0 CHECK (slot BETWEEN 0 AND 63);
ALTER TABLE sku_stock ADD PRIMARY KEY (sku, slot);
ALTER TABLE sku_stock ADD FOREIGN KEY (sku) REFERENCES sku (sku);
ALTER TABLE stock_lock ADD FOREIGN KEY (sku) REFERENCES sku (sku);
ALTER TABLE stock_ledger ADD FOREIGN KEY (sku) REFERENCES sku (sku);
ALTER TABLE adjustment ADD FOREIGN KEY (sku) REFERENCES sku (sku);

-- The slot a lock took, and the slot a ledger row moved: the chain of before/after runs per slot.
ALTER TABLE stock_lock ADD COLUMN slot int NOT NULL DEFAULT 0;
ALTER TABLE stock_ledger ADD COLUMN slot int NOT NULL DEFAULT 0;
DROP INDEX stock_ledger_by_sku;
CREATE INDEX stock_ledger_by_slot ON stock_ledger (sku, slot, id);

-- rebalance: units of available moved between two slots of a SKU (a pair of rows, out and in).
ALTER TABLE stock_ledger DROP CONSTRAINT stock_ledger_change_type_check;
ALTER TABLE stock_ledger ADD CONSTRAINT stock_ledger_change_type_check CHECK (change_type IN ('lock', 'sell',
    'release_timeout', 'release_cancel', 'refund_restock', 'ship', 'purchase_expected', 'purchase_inbound',
    'manual_adjust', 'stocktake', 'rebalance'));

-- +goose Down
ALTER TABLE stock_ledger DROP CONSTRAINT stock_ledger_change_type_check;
ALTER TABLE stock_ledger ADD CONSTRAINT stock_ledger_change_type_check CHECK (change_type IN ('lock', 'sell',
    'release_timeout', 'release_cancel', 'refund_restock', 'ship', 'purchase_expected', 'purchase_inbound',
    'manual_adjust', 'stocktake'));
DROP INDEX stock_ledger_by_slot;
CREATE INDEX stock_ledger_by_sku ON stock_ledger (sku, id);
ALTER TABLE stock_ledger DROP COLUMN slot;
ALTER TABLE stock_lock DROP COLUMN slot;
ALTER TABLE adjustment DROP CONSTRAINT adjustment_sku_fkey;
ALTER TABLE stock_ledger DROP CONSTRAINT stock_ledger_sku_fkey;
ALTER TABLE stock_lock DROP CONSTRAINT stock_lock_sku_fkey;
ALTER TABLE sku_stock DROP CONSTRAINT sku_stock_sku_fkey;
ALTER TABLE sku_stock DROP CONSTRAINT sku_stock_pkey;
DELETE FROM sku_stock WHERE slot > 0; -- only safe on a database that never used slots
ALTER TABLE sku_stock DROP COLUMN slot;
ALTER TABLE sku_stock ADD PRIMARY KEY (sku);
ALTER TABLE stock_lock ADD FOREIGN KEY (sku) REFERENCES sku_stock (sku);
ALTER TABLE stock_ledger ADD FOREIGN KEY (sku) REFERENCES sku_stock (sku);
ALTER TABLE adjustment ADD FOREIGN KEY (sku) REFERENCES sku_stock (sku);
DROP TABLE sku;
