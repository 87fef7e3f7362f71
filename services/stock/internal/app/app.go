// Package app holds the stock service's use cases, one file each. A use case runs in one
// transaction: the inbox row of the message it consumes (if any), the movement and its ledger
// row, and the outbox rows of the events it emits — so a crash at any line loses or
// duplicates nothing.
package app

import (
	"context"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
)

// Operator is the ledger's operator for movements driven by events.
const Operator = "stock-consumer"

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

// Inbound identifies the message a use case consumes; nil for HTTP calls.
type Inbound struct {
	Consumer  string
	MessageID string
}

// inTx runs fn in one transaction after claiming in (a message already processed returns
// duplicate=true and runs nothing), then writes the events fn returns to the outbox.
func (s *Service) inTx(ctx context.Context, in *Inbound, fn func(*postgres.Tx) ([]events.Event, error)) (duplicate bool, err error) {
	err = s.store.InTx(ctx, func(tx *postgres.Tx) error {
		if in != nil {
			fresh, err := inbox.Claim(ctx, tx.PgxTx(), in.Consumer, in.MessageID)
			if err != nil {
				return err
			}
			if !fresh {
				duplicate = true
				return nil
			}
		}
		evs, err := fn(tx)
		if err != nil {
			return err
		}
		msgs := make([]events.Message, len(evs))
		for i, ev := range evs {
			if msgs[i], err = events.Encode(ev, s.now()); err != nil {
				return err
			}
		}
		return outbox.Write(ctx, tx.PgxTx(), msgs...)
	})
	return duplicate, err
}

// Resolution is what a sell, release, ship or refund did to an order's locks.
type Resolution struct {
	OrderID   string
	Applied   bool            // stock moved now
	State     string          // the locks' state afterwards
	Relocked  bool            // a late payment took released stock again
	NoOp      string          // why nothing moved, when Applied is false
	Failed    string          // a sell that could not be made (stock.sell_failed was emitted)
	Duplicate bool            // the message had been processed before: nothing was done
	Entries   []LedgerSummary // the ledger rows written
}

// LedgerSummary names a ledger row a use case wrote.
type LedgerSummary struct {
	ID   int64
	SKU  string
	Type string
	Qty  int64
}
