// Package app holds the stock service's use cases, one file each. A use case runs in one
// transaction: the inbox row of the message it consumes (if any), the movement and its ledger
// row, and the outbox rows of the events it emits — so a crash at any line loses or
// duplicates nothing.
package app

import (
	"context"
	"errors"
	"time"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
)

// Operator is the ledger's operator for movements driven by events.
const Operator = "stock-consumer"

// Service runs the stock use cases. Lock requests, and the requests that resolve locks (sell,
// release, ship, refund), are combined: concurrent ones run together in one transaction
// (DESIGN §7), each with its own answer, its own ledger rows and its own events.
type Service struct {
	store    *postgres.Store
	now      func() time.Time
	locks    *combine.Batcher[lockCall, postgres.LockResult]
	resolves *combine.Batcher[resolveCall, Resolution]
}

// New returns a Service on store that combines requests with the default options.
func New(store *postgres.Store) *Service { return NewCombining(store, combine.Options{}) }

// NewCombining returns a Service on store that combines requests as opts says; MaxBatch 1
// runs every request in its own transaction.
func NewCombining(store *postgres.Store, opts combine.Options) *Service {
	s := &Service{store: store, now: time.Now}
	// Batches run on a context of their own: a caller giving up must not abort the others.
	ctx := context.Background()
	s.locks = combine.New(ctx, opts, combined(func(c lockCall) string { return c.req.OrderID }, s.lockOrders))
	s.resolves = combine.New(ctx, opts, combined(func(c resolveCall) string { return c.orderID }, s.resolveOrders))
	return s
}

// Close waits for the batches in flight; later calls fail.
func (s *Service) Close() {
	s.locks.Close()
	s.resolves.Close()
}

// Store returns the service's store, for read-only queries.
func (s *Service) Store() *postgres.Store { return s.store }

// Inbound identifies the message a use case consumes; nil for HTTP calls.
type Inbound struct {
	Consumer  string
	MessageID string
}

// unit is one request's share of a transaction.
type unit struct {
	ctx    context.Context // the caller's: its trace goes with the events
	in     *Inbound        // the message consumed; nil for HTTP calls
	dup    bool            // the message was processed before: nothing was done
	events []events.Event  // what the request emits
	err    error           // the request failed and wrote nothing; the others go on
}

// errNoneDone rolls back a transaction in which every unit failed.
var errNoneDone = errors.New("every request of the transaction failed")

// inTx runs units in one transaction: it claims their messages (a message processed before
// marks its unit dup and leaves it out), lets fn do the work of the fresh ones (indexes into
// units), withdraws the claims of the units fn marked failed, so that their messages are
// retried, and writes the others' events to the outbox, each with its caller's trace. A crash
// at any line loses or duplicates nothing; an error from fn rolls back every unit.
func (s *Service) inTx(ctx context.Context, units []*unit, fn func(tx *postgres.Tx, fresh []int) error) error {
	err := s.store.InTx(ctx, func(tx *postgres.Tx) error {
		for _, u := range units {
			u.dup, u.events, u.err = false, nil, nil // a retried batch starts over
		}
		fresh, err := claim(ctx, tx, units)
		if err != nil {
			return err
		}
		if len(fresh) == 0 {
			return nil
		}
		if err := fn(tx, fresh); err != nil {
			return err
		}
		var failed []inbox.Message
		var msgs []events.Message
		for _, i := range fresh {
			u := units[i]
			if u.err != nil {
				if u.in != nil {
					failed = append(failed, inbox.Message{Consumer: u.in.Consumer, ID: u.in.MessageID})
				}
				continue
			}
			for _, ev := range u.events {
				m, err := events.Encode(ev, s.now())
				if err != nil {
					return err
				}
				m.Headers = map[string]string{}
				telemetry.InjectMap(u.ctx, m.Headers)
				msgs = append(msgs, m)
			}
		}
		if len(failed) == len(fresh) {
			return errNoneDone
		}
		if err := inbox.Unclaim(ctx, tx.PgxTx(), failed); err != nil {
			return err
		}
		return outbox.Stage(ctx, tx.Staged(), msgs...)
	})
	if errors.Is(err, errNoneDone) {
		return nil // each unit has its error
	}
	return err
}

// claim takes the inbox claims of the units that consume a message and returns the indexes of
// the fresh units (HTTP calls are always fresh).
func claim(ctx context.Context, tx *postgres.Tx, units []*unit) ([]int, error) {
	var msgs []inbox.Message
	var consuming []int
	for i, u := range units {
		if u.in != nil {
			msgs, consuming = append(msgs, inbox.Message{Consumer: u.in.Consumer, ID: u.in.MessageID}), append(consuming, i)
		}
	}
	if len(msgs) > 0 {
		fresh, err := inbox.ClaimAll(ctx, tx.PgxTx(), msgs)
		if err != nil {
			return nil, err
		}
		for k, i := range consuming {
			units[i].dup = !fresh[k]
		}
	}
	var out []int
	for i, u := range units {
		if !u.dup {
			out = append(out, i)
		}
	}
	return out, nil
}

// one runs a single unit in its own transaction and returns its error.
func (s *Service) one(ctx context.Context, u *unit, fn func(tx *postgres.Tx) error) error {
	if err := s.inTx(ctx, []*unit{u}, func(tx *postgres.Tx, _ []int) error { return fn(tx) }); err != nil {
		return err
	}
	return u.err
}

// combined turns run, which takes a batch of calls in one transaction, into a combine batch
// function. Calls with the same key go to separate rounds, one after the other (two payments
// of one order are decided in turn); a round that fails as a whole is run one call at a time
// (combine.Fallback).
func combined[C, T any](key func(C) string, run func(ctx context.Context, calls []C) ([]combine.Result[T], error)) func(context.Context, []C) []combine.Result[T] {
	round := combine.Fallback(run, func(ctx context.Context, c C) combine.Result[T] {
		res, err := run(ctx, []C{c})
		if err != nil {
			return combine.Result[T]{Err: err}
		}
		return res[0]
	})
	return func(ctx context.Context, calls []C) []combine.Result[T] {
		out := make([]combine.Result[T], len(calls))
		var rounds [][]int
		seen := map[string]int{}
		for i, c := range calls {
			k := seen[key(c)]
			seen[key(c)]++
			if k == len(rounds) {
				rounds = append(rounds, nil)
			}
			rounds[k] = append(rounds[k], i)
		}
		for _, r := range rounds {
			batch := make([]C, len(r))
			for j, i := range r {
				batch[j] = calls[i]
			}
			for j, res := range round(ctx, batch) {
				out[r[j]] = res
			}
		}
		return out
	}
}

// Resolution is what a sell, release, ship or refund did to an order's locks.
type Resolution struct {
	OrderID   string
	Applied   bool   // stock moved now
	State     string // the locks' state afterwards
	Relocked  bool   // a late payment took released stock again
	NoOp      string // why nothing moved, when Applied is false
	Failed    string // a sell that could not be made (stock.sell_failed was emitted)
	Duplicate bool   // the message had been processed before: nothing was done
	Entries   []LedgerSummary
}

// LedgerSummary names a ledger row a use case wrote.
type LedgerSummary struct {
	ID   int64
	SKU  string
	Type string
	Qty  int64
}
