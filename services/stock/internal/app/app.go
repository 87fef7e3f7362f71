// Package app holds the stock service's use cases, one file each. A use case runs in one
// transaction: the movement, its ledger row and (with the event flow) its outbox and inbox rows.
package app

import (
	"time"

	"github.com/stockflow/stockflow/services/stock/internal/postgres"
)

// Service runs the stock use cases.
type Service struct {
	store *postgres.Store
	now   func() time.Time
}

// New returns a Service on store.
func New(store *postgres.Store) *Service {
	return &Service{store: store, now: time.Now}
}

// Store returns the service's store, for read-only queries.
func (s *Service) Store() *postgres.Store { return s.store }

// Resolution is what a sell, release, ship or refund did to an order's locks.
type Resolution struct {
	OrderID  string
	Applied  bool            // stock moved now
	State    string          // the locks' state afterwards
	Relocked bool            // a late payment took released stock again
	NoOp     string          // why nothing moved, when Applied is false
	Entries  []LedgerSummary // the ledger rows written
}

// LedgerSummary names a ledger row a use case wrote.
type LedgerSummary struct {
	ID   int64
	SKU  string
	Type string
	Qty  int64
}
