package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/services/order/internal/app"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

var (
	_ app.BatchCreator = (*Store)(nil)
	_ app.BatchUpdater = (*Store)(nil)
)

// CreateAll implements app.BatchCreator in one transaction: one multi-row INSERT … ON
// CONFLICT DO NOTHING claims the keys (in key order, so two batches sharing keys cannot
// deadlock), in the round trip that begins the transaction; the keys others hold are looked
// up and the orders of the requests that replay an earlier one read (only when there are
// some); the lines, history and outbox rows of the orders that got their key go with the
// COMMIT (outbox.InTxBatch). Two round trips for a batch of new orders.
func (s *Store) CreateAll(ctx context.Context, orders []app.NewOrder) ([]app.Created, error) {
	out := make([]app.Created, len(orders))
	err := outbox.InTxBatch(ctx, s.pool, func(tx pgx.Tx, last *pgx.Batch) error {
		first := map[string]int{}
		var claims []int // the first order of each key: the one that may insert
		for i, n := range orders {
			if _, ok := first[n.Key]; !ok {
				first[n.Key] = i
				claims = append(claims, i)
			}
		}
		slices.SortFunc(claims, func(a, b int) int { return cmp.Compare(orders[a].Key, orders[b].Key) })
		inserted, err := insertOrders(ctx, tx, orders, claims)
		if err != nil {
			return err
		}
		// holder is, per key, the order stored under it: ours, or an earlier request's.
		type holder struct {
			id   string
			hash []byte
			mine *order.Order
		}
		holders := map[string]holder{}
		var created []*order.Order
		var msgs []events.Message
		var taken []string
		for _, i := range claims {
			n := orders[i]
			if inserted[n.Order.ID()] {
				holders[n.Key] = holder{id: n.Order.ID(), hash: n.RequestHash, mine: n.Order}
				created, msgs = append(created, n.Order), append(msgs, n.Msgs...)
				out[i] = app.Created{Order: n.Order, Created: true}
			} else {
				taken = append(taken, n.Key)
			}
		}
		queueItemsAndHistory(last, created)
		if err := outbox.Stage(ctx, last, msgs...); err != nil {
			return err
		}
		if len(taken) > 0 {
			rows, err := tx.Query(ctx, `SELECT id, idempotency_key, request_hash FROM orders WHERE idempotency_key = ANY($1)`, taken)
			if err != nil {
				return fmt.Errorf("look up %d idempotency keys: %w", len(taken), err)
			}
			var h holder
			var key string
			_, err = pgx.ForEachRow(rows, []any{&h.id, &key, &h.hash}, func() error {
				holders[key] = h
				return nil
			})
			if err != nil {
				return fmt.Errorf("look up %d idempotency keys: %w", len(taken), err)
			}
		}
		// The orders that replay an earlier one's, read only now that their hashes matched:
		// a conflicting request learns nothing of the order it clashed with.
		var replays []int
		var replayIDs []string
		for i, n := range orders {
			if out[i].Created {
				continue
			}
			h, ok := holders[n.Key]
			if !ok {
				return fmt.Errorf("look up idempotency key %q: no order holds it", n.Key)
			}
			if !bytes.Equal(h.hash, n.RequestHash) {
				out[i].Err = fmt.Errorf("create order: %w (order %s)", app.ErrIdempotencyConflict, h.id)
				continue
			}
			replays = append(replays, i)
			if h.mine == nil {
				replayIDs = append(replayIDs, h.id)
			}
		}
		earlier := map[string]*order.Order{}
		if len(replayIDs) > 0 {
			os, err := query(ctx, tx, selectOrders+`WHERE o.id = ANY($1)`, replayIDs)
			if err != nil {
				return fmt.Errorf("load earlier orders: %w", err)
			}
			for _, o := range os {
				earlier[o.ID()] = o
			}
		}
		for _, i := range replays {
			h := holders[orders[i].Key]
			stored := h.mine
			if stored == nil {
				stored = earlier[h.id]
			}
			if stored == nil {
				return fmt.Errorf("load order %s: %w", h.id, order.ErrNotFound)
			}
			// A copy: each caller gets an order of its own, as it would from a load.
			o, err := order.Restore(stored.Snapshot())
			if err != nil {
				return err
			}
			out[i] = app.Created{Order: o}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create %d orders: %w", len(orders), err)
	}
	return out, nil
}

// insertOrders inserts the order rows of orders[claims], in that order, skipping those whose
// key is taken, and returns the ids inserted.
func insertOrders(ctx context.Context, tx pgx.Tx, orders []app.NewOrder, claims []int) (map[string]bool, error) {
	n := len(claims)
	var (
		ids, keys, buyers, currencies, statuses = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		hashes                                  = make([][]byte, n)
		totals, timeouts                        = make([]int64, n), make([]int64, n)
		createdAts, expiresAts, updatedAts      = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		cancelAts                               = make([]*time.Time, n)
	)
	for j, i := range claims {
		snap := orders[i].Order.Snapshot()
		ids[j], keys[j], hashes[j], buyers[j], currencies[j] = snap.ID, orders[i].Key, orders[i].RequestHash, snap.BuyerID, snap.Currency
		totals[j], timeouts[j], statuses[j] = snap.Total, int64(snap.PaymentTimeout), snap.Status
		createdAts[j], expiresAts[j], updatedAts[j], cancelAts[j] = snap.CreatedAt, snap.ExpiresAt, snap.UpdatedAt, nullTime(snap.CancelRequestedAt)
	}
	var got []string
	b := &pgx.Batch{} // a batch, so the transaction's BEGIN goes with it
	b.Queue(`
		INSERT INTO orders (id, idempotency_key, request_hash, buyer_id, currency, total, payment_timeout_ns,
		                    status, created_at, expires_at, updated_at, cancel_requested_at)
		SELECT id, k, h, b, c, t, pt, st, ca, ea, ua, cra
		  FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[], $5::text[], $6::bigint[], $7::bigint[],
		              $8::text[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[])
		       WITH ORDINALITY AS u (id, k, h, b, c, t, pt, st, ca, ea, ua, cra, ord)
		 ORDER BY ord
		ON CONFLICT (idempotency_key) DO NOTHING
		RETURNING id`,
		ids, keys, hashes, buyers, currencies, totals, timeouts, statuses, createdAts, expiresAts, updatedAts, cancelAts).
		Query(func(rows pgx.Rows) (err error) {
			got, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("insert orders: %w", err)
	}
	inserted := make(map[string]bool, len(got))
	for _, id := range got {
		inserted[id] = true
	}
	return inserted, nil
}

// queueItemsAndHistory queues the lines and the history of the new orders os on b, one
// statement each.
func queueItemsAndHistory(b *pgx.Batch, os []*order.Order) {
	if len(os) == 0 {
		return
	}
	var iOrders, skus, hOrders, hStatuses, hReasons []string
	var lines, hSeqs []int32
	var qtys, prices []int64
	var hAts []time.Time
	for _, o := range os {
		snap := o.Snapshot()
		for l, it := range snap.Items {
			iOrders, lines, skus, qtys, prices = append(iOrders, snap.ID), append(lines, int32(l)), append(skus, it.SKU), append(qtys, it.Qty), append(prices, it.UnitPrice)
		}
		for seq, h := range snap.History {
			hOrders, hSeqs, hStatuses, hReasons, hAts = append(hOrders, snap.ID), append(hSeqs, int32(seq)), append(hStatuses, h.Status.String()), append(hReasons, h.Reason), append(hAts, h.At)
		}
	}
	b.Queue(`
		INSERT INTO order_items (order_id, line, sku, qty, unit_price)
		SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::bigint[], $5::bigint[])`,
		iOrders, lines, skus, qtys, prices)
	if len(hOrders) > 0 {
		b.Queue(`
			INSERT INTO order_history (order_id, seq, status, reason, at)
			SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::timestamptz[])`,
			hOrders, hSeqs, hStatuses, hReasons, hAts)
	}
}

// UpdateAll implements app.BatchUpdater: UpdateWith for many orders in one transaction and a
// handful of statements, whatever their number — one commit and one WAL flush for all. The
// inbox claims are taken in one statement (outbox.Batch), the orders locked (in id order, so
// two batches cannot deadlock) and read in two more; each fn then runs in arrival order on its
// order (so two updates of one order see each other), and the changed rows, their history and
// the outbox rows go in one round trip before the commit. An update that fails (an unknown
// order, fn's error) leaves its order as it was and its message unclaimed; the others commit.
func (s *Store) UpdateAll(ctx context.Context, ups []app.Update) ([]app.Updated, error) {
	units := make([]*outbox.Unit, len(ups))
	for i, u := range ups {
		units[i] = &outbox.Unit{In: u.In}
	}
	err := outbox.Batch(ctx, s.pool, units, func(tx pgx.Tx, b *pgx.Batch, fresh []int) error {
		orders, err := lockAll(ctx, tx, ups, fresh)
		if err != nil {
			return err
		}
		loaded := map[string]int{} // history entries each order had when read
		for id, o := range orders {
			loaded[id] = len(o.History())
		}
		for _, i := range fresh {
			u, unit := ups[i], units[i]
			o, ok := orders[u.ID]
			if !ok {
				unit.Err = fmt.Errorf("update order %s: %w: %s", u.ID, order.ErrNotFound, u.ID)
			} else if unit.Msgs, err = runOn(o, u.Fn); err != nil {
				unit.Err = fmt.Errorf("update order %s: %w", u.ID, err)
			}
		}
		queueChanges(b, orders, loaded)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]app.Updated, len(ups))
	for i, u := range units {
		out[i] = app.Updated{Duplicate: u.Dup, Err: u.Err}
	}
	return out, nil
}

// lockAll locks the orders the fresh updates (indexes into ups) name, in id order, and reads
// them.
func lockAll(ctx context.Context, tx pgx.Tx, ups []app.Update, fresh []int) (map[string]*order.Order, error) {
	var ids []string
	for _, i := range fresh {
		ids = append(ids, ups[i].ID)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM orders WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
		return nil, fmt.Errorf("lock %d orders: %w", len(ids), err)
	}
	list, err := query(ctx, tx, selectOrders+`WHERE o.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("load %d orders: %w", len(ids), err)
	}
	orders := make(map[string]*order.Order, len(list))
	for _, o := range list {
		orders[o.ID()] = o
	}
	return orders, nil
}

// runOn runs fn on o; when fn fails, o is put back as it was.
func runOn(o *order.Order, fn func(*order.Order) ([]events.Message, error)) ([]events.Message, error) {
	before := o.Snapshot()
	msgs, err := fn(o)
	if err == nil {
		return msgs, nil
	}
	back, rerr := order.Restore(before)
	if rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	*o = *back
	return nil, err
}

// queueChanges queues on b the new status and the new history of every order that changed
// since it was read (loaded holds its history length then).
func queueChanges(b *pgx.Batch, orders map[string]*order.Order, loaded map[string]int) {
	var ids, statuses []string
	var updated, cancelAt []*time.Time
	var hIDs, hStatuses, hReasons []string
	var hSeqs []int
	var hAts []time.Time
	for id, o := range orders {
		snap := o.Snapshot()
		if len(snap.History) == loaded[id] {
			continue
		}
		ids, statuses = append(ids, id), append(statuses, snap.Status)
		updated, cancelAt = append(updated, &snap.UpdatedAt), append(cancelAt, nullTime(snap.CancelRequestedAt))
		for k, h := range snap.History[loaded[id]:] {
			hIDs, hSeqs, hStatuses, hReasons, hAts = append(hIDs, id), append(hSeqs, loaded[id]+k), append(hStatuses, h.Status.String()), append(hReasons, h.Reason), append(hAts, h.At)
		}
	}
	if len(ids) == 0 {
		return
	}
	b.Queue(`UPDATE orders SET status = u.status, updated_at = u.updated_at, cancel_requested_at = u.cancel_at
		FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS u(id, status, updated_at, cancel_at)
		WHERE orders.id = u.id`, ids, statuses, updated, cancelAt)
	b.Queue(`INSERT INTO order_history (order_id, seq, status, reason, at)
		SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::timestamptz[])`,
		hIDs, hSeqs, hStatuses, hReasons, hAts)
}
