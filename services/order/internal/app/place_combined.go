package app

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// NewOrder is one order to store with BatchCreator.CreateAll: the arguments of one
// Repository.Create.
type NewOrder struct {
	Order       *order.Order
	Key         string
	RequestHash []byte
	Msgs        []events.Message
}

// Created is CreateAll's answer for one NewOrder: what Repository.Create would have returned.
type Created struct {
	Order   *order.Order
	Created bool
	// Err is this order's own failure (wrapping ErrIdempotencyConflict); nothing was stored
	// for it, and the others of the batch are unaffected.
	Err error
}

// BatchCreator stores many new orders in one transaction.
type BatchCreator interface {
	// CreateAll is Repository.Create for each of orders, in one transaction, with one answer
	// per order in order. A key used more than once behaves as Creates made one after the
	// other: the first occurrence decides and the later ones get its order (created=false)
	// or ErrIdempotencyConflict. An error fails the batch as a whole: nothing is stored.
	CreateAll(ctx context.Context, orders []NewOrder) ([]Created, error)
}

// Update is the arguments of one Repository.UpdateWith.
type Update struct {
	ID string
	In *inbox.Message
	Fn func(*order.Order) ([]events.Message, error)
}

// Updated is UpdateAll's answer for one Update: what UpdateWith would have returned.
type Updated struct {
	Duplicate bool
	Err       error // this update's own failure; the others of the batch are unaffected
}

// BatchUpdater runs many UpdateWith in one transaction.
type BatchUpdater interface {
	// UpdateAll is Repository.UpdateWith for each of ups, with one answer per update in
	// order. An error fails the batch as a whole: nothing is stored.
	UpdateAll(ctx context.Context, ups []Update) ([]Updated, error)
}

// CombiningRepository is a Repository whose Create and UpdateWith gather concurrent calls into
// CreateAll and UpdateAll batches — one transaction and one WAL flush for many buyers, or for
// many stock and payment outcomes (DESIGN §7). Every other method is the wrapped repository's.
type CombiningRepository struct {
	Repository
	batches *combine.Batcher[NewOrder, Created]
	updates *combine.Batcher[Update, Updated]
}

// Combine returns repo with Create and UpdateWith combined as opts says. When a batch fails
// as a whole (a deadlock victim, a constraint one order trips), each of its requests runs
// alone, so one bad request cannot fail the others.
func Combine(repo interface {
	Repository
	BatchCreator
	BatchUpdater
}, opts combine.Options) *CombiningRepository {
	batch := func(ctx context.Context, reqs []NewOrder) ([]combine.Result[Created], error) {
		res, err := repo.CreateAll(ctx, reqs)
		if err != nil {
			return nil, fmt.Errorf("create order: %w", err)
		}
		out := make([]combine.Result[Created], len(res))
		for i, r := range res {
			out[i] = combine.Result[Created]{Value: r, Err: r.Err}
		}
		return out, nil
	}
	// One after the other, in arrival order: a repeated key then finds the earlier order.
	alone := func(ctx context.Context, r NewOrder) combine.Result[Created] {
		o, created, err := repo.Create(ctx, r.Order, r.Key, r.RequestHash, r.Msgs)
		return combine.Result[Created]{Value: Created{Order: o, Created: created}, Err: err}
	}
	run := combine.Fallback(batch, alone)
	updates := func(ctx context.Context, ups []Update) ([]combine.Result[Updated], error) {
		res, err := repo.UpdateAll(ctx, ups)
		if err != nil {
			return nil, fmt.Errorf("update orders: %w", err)
		}
		out := make([]combine.Result[Updated], len(res))
		for i, r := range res {
			out[i] = combine.Result[Updated]{Value: r, Err: r.Err}
		}
		return out, nil
	}
	updateAlone := func(ctx context.Context, u Update) combine.Result[Updated] {
		dup, err := repo.UpdateWith(ctx, u.ID, u.In, u.Fn)
		return combine.Result[Updated]{Value: Updated{Duplicate: dup}, Err: err}
	}
	// Batches run on a context of their own: a caller giving up must not abort the others.
	return &CombiningRepository{Repository: repo,
		batches: combine.New(context.Background(), opts.Named("create"), run),
		updates: combine.New(context.Background(), opts.Named("update"), combine.Fallback(updates, updateAlone))}
}

// UpdateWith implements Repository by running the update in the next batch; the messages fn
// returns carry the caller's trace.
func (r *CombiningRepository) UpdateWith(ctx context.Context, id string, in *inbox.Message, fn func(*order.Order) ([]events.Message, error)) (bool, error) {
	traced := func(o *order.Order) ([]events.Message, error) {
		msgs, err := fn(o)
		return withTrace(ctx, msgs), err
	}
	res, err := r.updates.Do(ctx, Update{ID: id, In: in, Fn: traced})
	return res.Duplicate, err
}

// Update implements Repository through UpdateWith, so it is combined too.
func (r *CombiningRepository) Update(ctx context.Context, id string, fn func(*order.Order) error) error {
	_, err := r.UpdateWith(ctx, id, nil, func(o *order.Order) ([]events.Message, error) { return nil, fn(o) })
	return err
}

// withTrace returns msgs with ctx's trace context in their headers (unless they carry one).
func withTrace(ctx context.Context, msgs []events.Message) []events.Message {
	traced := make([]events.Message, len(msgs))
	for i, m := range msgs {
		h := make(map[string]string, len(m.Headers)+2)
		if m.Headers["traceparent"] == "" {
			telemetry.InjectMap(ctx, h)
		}
		maps.Copy(h, m.Headers)
		m.Headers = h
		traced[i] = m
	}
	return traced
}

// Create implements Repository by running the order in the next batch. The messages carry
// the caller's trace: the batch's transaction runs on no caller's context.
func (r *CombiningRepository) Create(ctx context.Context, o *order.Order, key string, requestHash []byte, msgs []events.Message) (*order.Order, bool, error) {
	res, err := r.batches.Do(ctx, NewOrder{Order: o, Key: key, RequestHash: requestHash, Msgs: withTrace(ctx, msgs)})
	if errors.Is(err, combine.ErrClosed) || (err != nil && ctx.Err() != nil) {
		return nil, false, fmt.Errorf("create order: %w", err)
	}
	if err != nil {
		return nil, false, err // the repository's, wrapped as its Create wraps them
	}
	return res.Order, res.Created, nil
}

// Close waits for the batches in flight; later Creates fail with combine.ErrClosed.
func (r *CombiningRepository) Close() {
	r.batches.Close()
	r.updates.Close()
}
