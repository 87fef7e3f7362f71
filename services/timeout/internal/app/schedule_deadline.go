package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/outbox"
	"github.com/stockflow/stockflow/pkg/telemetry"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

// ScheduleType is the envelope type of a deadline's scheduled message. It is private to the
// timeout service (it schedules and consumes it), so it is not in pkg/events.
const ScheduleType = "timeout.schedule"

// Scheduled is the data of a deadline's scheduled message; the message that fires carries
// the same body.
type Scheduled struct {
	OrderID  string    `json:"order_id"`
	Deadline time.Time `json:"deadline"`
}

// Subject implements events.Event. It is the envelope type; the message itself goes to the
// order's own schedule subject (natsx.ScheduleSubject).
func (Scheduled) Subject() string { return ScheduleType }

// ScheduleDeadline stores the order's payment deadline — stock.locked — and, in the same
// transaction, the outbox row that makes JetStream fire timeout.fire.<order> at the deadline
// (rounded up to the second). An order already known — a duplicate stock.locked, or one whose
// stock.sold or stock.released overtook its lock (its row is cancelled) — schedules nothing.
// Concurrent calls share one transaction, each with its own inbox claim, row and schedule.
func (s *Service) ScheduleDeadline(ctx context.Context, in inbox.Message, ev events.StockLocked) error {
	d, err := deadline.Schedule(ev.OrderID, ev.PaymentDeadline, s.now())
	if err != nil {
		return fmt.Errorf("schedule deadline: %w", err)
	}
	out, err := s.schedules.Do(ctx, scheduleCall{ctx: ctx, in: in, d: d})
	if err != nil {
		return fmt.Errorf("schedule deadline %s: %w", ev.OrderID, err)
	}
	switch out {
	case duplicate:
		s.log.DebugContext(ctx, "stock.locked already processed", "order_id", ev.OrderID, "message_id", in.ID)
	case known:
		s.log.InfoContext(ctx, "deadline already known; nothing scheduled", "order_id", ev.OrderID)
	default:
		s.log.DebugContext(ctx, "deadline scheduled", "order_id", ev.OrderID, "deadline", d.At(), "fires_at", d.ScheduleAt())
	}
	return nil
}

// scheduleCall is one stock.locked waiting for its batch.
type scheduleCall struct {
	ctx context.Context // the caller's, for the trace its row and schedule carry
	in  inbox.Message
	d   *deadline.Deadline
}

// scheduled is what a schedule did.
type scheduled int

const (
	stored    scheduled = iota // the deadline and its schedule were written
	duplicate                  // the message was processed before
	known                      // the order already had a deadline: nothing written
)

// scheduleAll stores the deadlines of calls and their schedules in one transaction.
func (s *Service) scheduleAll(ctx context.Context, calls []scheduleCall) ([]combine.Result[scheduled], error) {
	units := make([]*outbox.Unit, len(calls))
	for i := range calls {
		units[i] = &outbox.Unit{In: &calls[i].in}
	}
	out := make([]combine.Result[scheduled], len(calls))
	err := s.store.Batch(ctx, units, func(tx Tx, fresh []int) error {
		ds := make([]Traced, len(fresh))
		for k, i := range fresh {
			ds[k] = Traced{Deadline: calls[i].d, Traceparent: telemetry.Traceparent(calls[i].ctx)}
		}
		inserted, err := tx.Insert(ctx, ds)
		if err != nil {
			return err
		}
		for k, i := range fresh {
			if !inserted[k] {
				out[i].Value = known
				continue
			}
			msg, err := s.scheduleMessage(calls[i].d)
			if err != nil {
				return err
			}
			telemetry.InjectMap(calls[i].ctx, msg.Headers)
			units[i].Msgs = []events.Message{msg}
		}
		return nil
	})
	for i, u := range units {
		if u.Dup {
			out[i].Value = duplicate
		}
	}
	return out, err
}

// scheduleMessage is the outbox message that schedules d. Its id is deterministic too: one
// schedule per order, however often it is written.
func (s *Service) scheduleMessage(d *deadline.Deadline) (events.Message, error) {
	msg, err := events.EncodeWithID("timeout-schedule:"+d.OrderID(), Scheduled{OrderID: d.OrderID(), Deadline: d.At()}, s.now())
	if err != nil {
		return events.Message{}, err
	}
	msg.Subject = natsx.ScheduleSubject(d.OrderID())
	if msg.Headers, err = natsx.ScheduleHeaders(d.OrderID(), d.ScheduleAt()); err != nil {
		return events.Message{}, err
	}
	return msg, nil
}

// DecodeFired reads the order id of a fired schedule message on subject: the body must be a
// Scheduled envelope for the order the subject names. Errors wrap events.ErrMalformed.
func DecodeFired(subject string, body []byte) (orderID string, err error) {
	orderID, ok := strings.CutPrefix(subject, natsx.SubjectFirePrefix)
	if !ok || orderID == "" {
		return "", fmt.Errorf("%w: fire subject %q", events.ErrMalformed, subject)
	}
	env, err := events.Open(body)
	if err != nil {
		return "", err
	}
	if env.Type != ScheduleType {
		return "", fmt.Errorf("%w: type %q on %s, want %s", events.ErrMalformed, env.Type, subject, ScheduleType)
	}
	var sc Scheduled
	if err := json.Unmarshal(env.Data, &sc); err != nil {
		return "", fmt.Errorf("%w: %s data: %v", events.ErrMalformed, ScheduleType, err)
	}
	if sc.OrderID != orderID {
		return "", fmt.Errorf("%w: schedule of order %q fired on %s", events.ErrMalformed, sc.OrderID, subject)
	}
	return orderID, nil
}
