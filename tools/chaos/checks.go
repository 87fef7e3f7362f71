package chaos

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/tools/chaos/history"
	"github.com/stockflow/stockflow/tools/flashsale"
	"github.com/stockflow/stockflow/tools/launcher"
)

// Names of the checks the run adds to the sale's own.
const (
	CheckFaults         = "every fault kind injected, every step ran"
	CheckTerminalInTime = "every order terminal by its deadline + bound"
	CheckPaidHonoured   = "every paid order sold or refunded"
	CheckAppliedOnce    = "no message applied twice"
	CheckPublished      = "every committed outbox row published"
	CheckDeadLetters    = "no dead letter left unexplained"
	CheckNotEarly       = "no lock released by timeout before its deadline"
	CheckHistory        = "each lock resolved at most once (porcupine)"
)

// notPromised are the sale's checks that faults may break without breaking a promise: stock's
// metrics restart at zero with its process; buyers' calls fail while a service is away (they
// are counted in the report); and a payment callback whose answer was lost (the adapter
// killed after its commit, the buyer out of retries) took effect unacknowledged — what the
// adapter recorded is checked by CheckPaidHonoured instead.
var notPromised = []string{flashsale.CheckMetrics, flashsale.CheckNoErrors, flashsale.CheckPayments}

// check brings every service back, then runs the checks.
func (r *runner) check(ctx context.Context, rep *Report) []flashsale.Check {
	var cs []flashsale.Check
	add := func(name string, err error, detail string, args ...any) {
		c := flashsale.Check{Name: name, Pass: err == nil, Detail: fmt.Sprintf(detail, args...)}
		if err != nil {
			c.Detail = err.Error()
		}
		cs = append(cs, c)
	}

	var missing []string
	for _, k := range Kinds {
		if rep.Injected[k] == 0 {
			missing = append(missing, k)
		}
	}
	failed := 0
	for _, e := range r.timeline {
		if e.Err != "" {
			failed++
		}
	}
	var faultsErr error
	if len(missing) > 0 || failed > 0 {
		faultsErr = fmt.Errorf("not injected: %s; %d steps failed (see the timeline)", strings.Join(missing, ", "), failed)
	}
	add(CheckFaults, faultsErr, "%d faults of %d kinds, %d steps", sumValues(rep.Injected), len(rep.Injected), len(r.timeline))

	for _, c := range rep.Sale.Checks {
		if !slices.Contains(notPromised, c.Name) {
			cs = append(cs, c)
		}
	}
	if rep.SaleErr != "" && !rep.Sale.Failed() {
		add("the sale ran to its end", errors.New(rep.SaleErr), "")
	}

	dbs, err := r.connect(ctx)
	if err != nil {
		add("the databases answer after the run", err, "")
		return cs
	}
	defer dbs.close(ctx)
	n, err := dbs.terminalInTime(ctx, func(deadline time.Time) time.Duration { return endBound + r.downAfter(deadline) })
	add(CheckTerminalInTime, err, "all %d orders terminal, each by its deadline + %s + the time after it that PostgreSQL, the only nats-server or a service's link was down", n, endBound)
	n, err = dbs.paidHonoured(ctx)
	add(CheckPaidHonoured, err, "%d succeeded payments: each order paid and its stock sold, or refunded", n)
	n, err = dbs.appliedOnce(ctx)
	add(CheckAppliedOnce, err, "%d order histories and their ledger rows: no status or change repeated", n)
	n, err = dbs.notEarly(ctx)
	add(CheckNotEarly, err, "%d timeout releases, none before its lock's deadline", n)
	n, err = r.published(ctx, dbs)
	add(CheckPublished, err, "%d outbox rows of the four services, none unpublished, each in its stream", n)
	n, err = r.deadLetters(ctx)
	add(CheckDeadLetters, err, "DEADLETTER holds %d messages", n)
	res, err := r.history(ctx, rep.Sale)
	if err == nil && !res.OK {
		err = errors.New(res.String())
		if verr := res.WriteVisualization(filepath.Join(r.cfg.RunDir, "history.html")); verr != nil {
			err = errors.Join(err, verr)
		}
	}
	add(CheckHistory, err, "%s", res)
	return cs
}

// history is every order's lock history — the ledger, the orders' statuses and the payments
// the buyers saw acknowledged — checked against the sequential model of a lock.
func (r *runner) history(ctx context.Context, sale *flashsale.Report) (history.Result, error) {
	stock, err := pgxpool.New(ctx, r.sys.ServiceDatabaseURL("stock"))
	if err != nil {
		return history.Result{}, err
	}
	defer stock.Close()
	order, err := pgxpool.New(ctx, r.sys.ServiceDatabaseURL("order"))
	if err != nil {
		return history.Result{}, err
	}
	defer order.Close()
	ops, err := history.Load(ctx, stock, order, history.Filter{})
	if err != nil {
		return history.Result{}, err
	}
	for _, o := range sale.Outcomes {
		if o.PaidOK {
			ops = append(ops, history.Op{OrderID: o.OrderID, Kind: history.PayAcked})
		}
	}
	return history.Check(ops), nil
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// databases are direct connections (not through the proxies) to each service's database.
type databases struct {
	order, stock, payment, timeout *pgx.Conn
}

func (r *runner) connect(ctx context.Context) (*databases, error) {
	d := &databases{}
	for svc, c := range map[string]**pgx.Conn{"order": &d.order, "stock": &d.stock, "payment-adapter": &d.payment, "timeout": &d.timeout} {
		conn, err := pgx.Connect(ctx, r.sys.ServiceDatabaseURL(svc))
		if err != nil {
			d.close(ctx)
			return nil, fmt.Errorf("%s's database: %w", svc, err)
		}
		*c = conn
	}
	return d, nil
}

func (d *databases) close(ctx context.Context) {
	for _, c := range []*pgx.Conn{d.order, d.stock, d.payment, d.timeout} {
		if c != nil {
			_ = c.Close(ctx)
		}
	}
}

// terminal are the statuses an order may end in (DESIGN §9); refund_pending is on its way.
var terminal = []string{"paid", "rejected", "closed", "cancelled", "shipped", "refunded"}

// endBound is how long after its deadline, not counting the time a dependency was down, an
// order may take to end: the overdue-lock sweep's grace and interval, a service's restart
// backoff, and the hops of stock.released.
const endBound = 30 * time.Second

// terminalInTime: every order ends terminal, and reached its first terminal status no later
// than bound(deadline) after its payment deadline. It returns how many orders it looked at.
func (d *databases) terminalInTime(ctx context.Context, bound func(deadline time.Time) time.Duration) (int, error) {
	rows, err := d.order.Query(ctx, `
		SELECT o.id, o.status, o.expires_at,
		       (SELECT min(h.at) FROM order_history h WHERE h.order_id = o.id AND h.status = ANY($1))
		  FROM orders o`, terminal)
	if err != nil {
		return 0, err
	}
	type order struct {
		id, status string
		expires    time.Time
		ended      *time.Time
	}
	orders, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (order, error) {
		var o order
		return o, row.Scan(&o.id, &o.status, &o.expires, &o.ended)
	})
	if err != nil {
		return 0, err
	}
	var bad []string
	for _, o := range orders {
		switch {
		case !slices.Contains(terminal, o.status):
			bad = append(bad, fmt.Sprintf("%s is %s", o.id, o.status))
		case o.ended == nil:
			bad = append(bad, fmt.Sprintf("%s is %s with no terminal status in its history", o.id, o.status))
		case o.ended.After(o.expires.Add(bound(o.expires))):
			bad = append(bad, fmt.Sprintf("%s ended %s after its deadline (bound %s)", o.id,
				o.ended.Sub(o.expires).Round(time.Millisecond), bound(o.expires).Round(time.Millisecond)))
		}
	}
	return len(orders), few(bad, "orders")
}

// paidHonoured: every order with a succeeded payment is paid (or shipped) and its stock sold;
// every refunded payment's order is refunded, or paid by another payment (a double payment
// keeps the first and refunds the second) — never with its stock sold by the refunded one.
func (d *databases) paidHonoured(ctx context.Context) (int, error) {
	rows, err := d.payment.Query(ctx, `SELECT payment_id, order_id, status FROM payments WHERE status <> 'failed'`)
	if err != nil {
		return 0, err
	}
	type payment struct{ id, order, status string }
	pays, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (payment, error) {
		var p payment
		return p, row.Scan(&p.id, &p.order, &p.status)
	})
	if err != nil {
		return 0, err
	}
	var bad []string
	succeeded := 0
	for _, p := range pays {
		var status string
		if err := d.order.QueryRow(ctx, `SELECT status FROM orders WHERE id = $1`, p.order).Scan(&status); err != nil {
			bad = append(bad, fmt.Sprintf("payment of %s: order: %v", p.order, err))
			continue
		}
		var states []string
		lrows, err := d.stock.Query(ctx, `SELECT state FROM stock_lock WHERE order_id = $1`, p.order)
		if err == nil {
			states, err = pgx.CollectRows(lrows, pgx.RowTo[string])
		}
		if err != nil {
			return 0, err
		}
		sold := len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return s != "sold" && s != "shipped" })
		switch p.status {
		case "succeeded":
			succeeded++
			if (status != "paid" && status != "shipped") || !sold {
				bad = append(bad, fmt.Sprintf("%s: payment succeeded, order %s, locks %v", p.order, status, states))
			}
		case "refunded":
			if status != "refunded" && status != "paid" && status != "shipped" {
				bad = append(bad, fmt.Sprintf("%s: payment refunded, order %s", p.order, status))
			}
			var soldBy *string
			if err := d.stock.QueryRow(ctx, `SELECT payment_id FROM order_lock WHERE order_id = $1`, p.order).Scan(&soldBy); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return 0, err
			}
			if sold && soldBy != nil && *soldBy == p.id {
				bad = append(bad, fmt.Sprintf("%s: stock sold by payment %s, which was refunded", p.order, p.id))
			}
		}
	}
	return succeeded, few(bad, "payments")
}

// appliedOnce: no order's history holds a step twice (an outcome applied a second time
// would add it again; a cancel request keeps the status and adds a step of its own), and no order has two ledger rows of one change type for a SKU.
func (d *databases) appliedOnce(ctx context.Context) (int, error) {
	var n int
	if err := d.order.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil {
		return 0, err
	}
	rows, err := d.order.Query(ctx, `
		SELECT order_id || ' has "' || status || ': ' || reason || '" ' || count(*) || ' times in its history'
		  FROM order_history GROUP BY order_id, status, reason HAVING count(*) > 1`)
	if err != nil {
		return 0, err
	}
	bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	rows, err = d.stock.Query(ctx, `
		SELECT order_id || ' has ' || count(*) || ' ' || change_type || ' rows for ' || sku
		  FROM stock_ledger WHERE order_id IS NOT NULL GROUP BY order_id, sku, change_type HAVING count(*) > 1`)
	if err != nil {
		return 0, err
	}
	more, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	return n, few(append(bad, more...), "repeats")
}

// notEarly: no timeout release was written before its lock's deadline (by the database's
// clock, which no fault steps).
func (d *databases) notEarly(ctx context.Context) (int, error) {
	var n int
	if err := d.stock.QueryRow(ctx, `SELECT count(*) FROM stock_ledger WHERE change_type = 'release_timeout'`).Scan(&n); err != nil {
		return 0, err
	}
	rows, err := d.stock.Query(ctx, `
		SELECT l.order_id || ' released ' || round(extract(epoch FROM k.deadline - l.created_at)::numeric, 3) || ' s before its deadline'
		  FROM stock_ledger l JOIN stock_lock k ON k.order_id = l.order_id AND k.sku = l.sku
		 WHERE l.change_type = 'release_timeout' AND l.created_at < k.deadline`)
	if err != nil {
		return 0, err
	}
	bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	return n, few(bad, "early releases")
}

// published: within a minute no outbox row of any service is left unpublished, and every
// published event is in its stream (by Nats-Msg-Id). Schedules are left out: a fired
// schedule leaves its stream by design.
func (r *runner) published(ctx context.Context, d *databases) (int, error) {
	var pending int
	deadline := time.Now().Add(time.Minute)
	for {
		pending = 0
		for _, c := range []*pgx.Conn{d.order, d.stock, d.payment, d.timeout} {
			var n int
			if err := c.QueryRow(ctx, `SELECT count(*) FROM outbox_unpublished`).Scan(&n); err != nil {
				return 0, err
			}
			pending += n
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if pending > 0 {
		return 0, fmt.Errorf("%d outbox rows still unpublished a minute after the sale", pending)
	}
	ids, err := r.streamMsgIDs(ctx, natsx.StreamOrder, natsx.StreamStock, natsx.StreamPayment, natsx.StreamTimeout)
	if err != nil {
		return 0, err
	}
	var bad []string
	total := 0
	for svc, c := range map[string]*pgx.Conn{"order": d.order, "stock": d.stock, "payment-adapter": d.payment, "timeout": d.timeout} {
		rows, err := c.Query(ctx, `SELECT event_id, subject FROM outbox WHERE subject NOT LIKE 'timeout.schedule.%'`)
		if err != nil {
			return 0, err
		}
		type row struct{ id, subject string }
		evs, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
			var e row
			return e, cr.Scan(&e.id, &e.subject)
		})
		if err != nil {
			return 0, err
		}
		total += len(evs)
		for _, e := range evs {
			if !ids[e.id] {
				bad = append(bad, fmt.Sprintf("%s's %s %s marked published, not in its stream", svc, e.subject, e.id))
			}
		}
	}
	return total, few(bad, "events")
}

// streamMsgIDs reads the Nats-Msg-Id of every message in the streams.
func (r *runner) streamMsgIDs(ctx context.Context, streams ...string) (map[string]bool, error) {
	nc, js, err := natsx.Connect(ctx, r.sys.NATSURL, "stockflow-chaos")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ids := map[string]bool{}
	for _, name := range streams {
		if err := eachMessage(ctx, js, name, func(m jetstream.Msg) {
			ids[m.Headers().Get(jetstream.MsgIDHeader)] = true
		}); err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
	}
	return ids, nil
}

// eachMessage calls f with every message stream holds now.
func eachMessage(ctx context.Context, js jetstream.JetStream, stream string, f func(jetstream.Msg)) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	for seen := uint64(0); seen < info.State.Msgs; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			f(m)
			n++
			if md, err := m.Metadata(); err == nil && md.Sequence.Stream >= info.State.LastSeq {
				return nil
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%d of %d messages read", seen, info.State.Msgs)
		}
		seen += uint64(n)
	}
	return nil
}

// deadLetters: DEADLETTER is empty; otherwise each message's subject and reason is listed.
func (r *runner) deadLetters(ctx context.Context) (int, error) {
	nc, js, err := natsx.Connect(ctx, r.sys.NATSURL, "stockflow-chaos")
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	var bad []string
	err = eachMessage(ctx, js, natsx.StreamDeadLetter, func(m jetstream.Msg) {
		h := m.Headers()
		var parts []string
		for k, v := range h {
			if k != jetstream.MsgIDHeader {
				parts = append(parts, k+"="+strings.Join(v, ","))
			}
		}
		slices.Sort(parts)
		bad = append(bad, fmt.Sprintf("%s (%s)", m.Subject(), strings.Join(parts, " ")))
	})
	if err != nil {
		return 0, err
	}
	return len(bad), few(bad, "dead letters")
}

// few is nil for no findings, else an error naming how many and the first five.
func few(findings []string, what string) error {
	if len(findings) == 0 {
		return nil
	}
	slices.Sort(findings)
	shown := findings[:min(5, len(findings))]
	return fmt.Errorf("%d %s: %s", len(findings), what, strings.Join(shown, "; "))
}

// ensureUp starts any service that is down and waits until all four are ready.
func (r *runner) ensureUp(ctx context.Context) error {
	for _, svc := range launcher.Services {
		if r.sys.Exited(svc) {
			if err := r.sys.Start(ctx, svc); err != nil {
				return err
			}
		}
	}
	for _, svc := range launcher.Services {
		if err := r.sys.WaitReady(ctx, svc, time.Minute); err != nil {
			return err
		}
	}
	return nil
}
