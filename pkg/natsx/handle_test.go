package natsx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
)

// publishEvent publishes ev as the outbox relay would and returns its envelope id and stream
// sequence.
func publishEvent(t *testing.T, js jetstream.JetStream, ev events.Event) (id string, seq uint64) {
	t.Helper()
	m, err := events.Encode(ev, time.Now())
	require.NoError(t, err)
	ack, err := js.Publish(context.Background(), m.Subject, m.Data, jetstream.WithMsgID(m.ID))
	require.NoError(t, err)
	return m.ID, ack.Sequence
}

// deadLetter returns the dead letter of subject, nil when there is none.
func deadLetter(t *testing.T, js jetstream.JetStream, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	dl, err := lastMsg(context.Background(), js, natsx.StreamDeadLetter, natsx.SubjectDeadLetterPrefix+subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	require.NoError(t, err)
	return dl
}

// uses records what a use case was called with.
type uses[E any] struct {
	mu    sync.Mutex
	calls []inbox.Message
	evs   []E
}

func (u *uses[E]) add(in inbox.Message, ev E) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls, u.evs = append(u.calls, in), append(u.evs, ev)
	return len(u.calls)
}

func (u *uses[E]) n() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.calls)
}

func TestOnDecodesRunsTheUseCaseAndMarksItsErrors(t *testing.T) {
	errUnknown := errors.New("order not seen yet")
	errBad := errors.New("invalid order")
	errs := natsx.Errors{Permanent: []error{errBad}, Retry: []error{errUnknown}}
	tests := []struct {
		name string
		body []byte // nil: a valid order.created
		// result is the use case's result on its n-th call.
		result         func(n int) error
		wantCalls      int
		wantDeadLetter bool
	}{
		{name: "success is acked", result: func(int) error { return nil }, wantCalls: 1},
		{name: "a malformed message never reaches the use case", body: []byte(`{"id":"x","type":"order.created","data":{}}`),
			result: func(int) error { return nil }, wantCalls: 0, wantDeadLetter: true},
		{name: "a permanent domain error is dead-lettered", result: func(int) error { return fmt.Errorf("lock: %w", errBad) },
			wantCalls: 1, wantDeadLetter: true},
		{name: "any other error is retried", result: func(n int) error {
			if n < 2 {
				return errors.New("connection reset")
			}
			return nil
		}, wantCalls: 2},
		{name: "a retry error wins over a permanent one it wraps too", result: func(n int) error {
			if n < 2 {
				return fmt.Errorf("order o: %w (%w)", errBad, errUnknown)
			}
			return nil
		}, wantCalls: 2},
		{name: "an error marked Permanent stays poison", result: func(int) error { return natsx.Permanent(errUnknown) },
			wantCalls: 1, wantDeadLetter: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			js := setup(t)
			consumer := fmt.Sprintf("on-%d", i)
			created := events.OrderCreated{OrderID: "o1", BuyerID: "u1", Currency: "CNY", Total: 100,
				Items: []events.OrderItem{{SKU: "CUP-1", Qty: 1, UnitPrice: 100}}, PaymentDeadline: time.Now().Add(time.Hour).UTC()}
			var id string
			var seq uint64
			if tc.body == nil {
				id, seq = publishEvent(t, js, created)
			} else {
				ack, err := js.Publish(ctx, events.SubjectOrderCreated+".CUP-1", tc.body, jetstream.WithMsgID("bad"))
				require.NoError(t, err)
				seq = ack.Sequence
			}

			var got uses[events.OrderCreated]
			h := natsx.On(consumer, errs, func(_ context.Context, in inbox.Message, ev events.OrderCreated) error {
				return tc.result(got.add(in, ev))
			})
			stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: consumer}, h, testLogger(t))
			require.NoError(t, err)
			defer stop()
			require.Eventually(t, consumerSettled(t, js, consumer, seq), 10*time.Second, 20*time.Millisecond)
			stop()

			assert.Equal(t, tc.wantCalls, got.n())
			for j, in := range got.calls {
				assert.Equal(t, inbox.Message{Consumer: consumer, ID: id}, in, "the inbox identity: consumer and event id")
				assert.Equal(t, created.OrderID, got.evs[j].OrderID)
				assert.True(t, created.PaymentDeadline.Equal(got.evs[j].PaymentDeadline))
			}
			dl := deadLetter(t, js, events.SubjectOrderCreated+".>") // order.created.<partition>.<key>
			if !tc.wantDeadLetter {
				assert.Nil(t, dl, "unexpected dead letter")
				return
			}
			require.NotNil(t, dl, "dead letter missing")
			assert.Equal(t, "poison", dl.Header.Get(natsx.HeaderDLReason))
			assert.True(t, strings.HasPrefix(dl.Header.Get(natsx.HeaderDLError), consumer+": "),
				"the error names the consumer: %q", dl.Header.Get(natsx.HeaderDLError))
		})
	}
}

func TestSwitchRoutesBySubject(t *testing.T) {
	ctx := context.Background()
	js := setup(t)
	const consumer = "switch"
	errGone := errors.New("order gone")
	var cancels uses[events.OrderCancelRequested]
	var ships uses[events.OrderShipped]
	h := natsx.Switch(consumer, natsx.Errors{Permanent: []error{errGone}},
		natsx.Case(func(_ context.Context, in inbox.Message, ev events.OrderCancelRequested) error {
			cancels.add(in, ev)
			return nil
		}),
		natsx.Case(func(_ context.Context, in inbox.Message, ev events.OrderShipped) error {
			ships.add(in, ev)
			return errGone
		}),
	)
	cancelID, _ := publishEvent(t, js, events.OrderCancelRequested{OrderID: "o1"})
	shipID, _ := publishEvent(t, js, events.OrderShipped{OrderID: "o2"})
	_, last := publishEvent(t, js, events.OrderRefundRequested{OrderID: "o3"}) // no case for it
	stop, err := natsx.Consume(ctx, js, natsx.ConsumerSpec{Stream: natsx.StreamOrder, Durable: consumer}, h, testLogger(t))
	require.NoError(t, err)
	defer stop()
	require.Eventually(t, consumerSettled(t, js, consumer, last), 10*time.Second, 20*time.Millisecond)
	stop()

	assert.Equal(t, []inbox.Message{{Consumer: consumer, ID: cancelID}}, cancels.calls)
	assert.Equal(t, []events.OrderCancelRequested{{OrderID: "o1"}}, cancels.evs)
	assert.Equal(t, []inbox.Message{{Consumer: consumer, ID: shipID}}, ships.calls)
	assert.Nil(t, deadLetter(t, js, events.SubjectOrderCancelRequested))
	if dl := deadLetter(t, js, events.SubjectOrderShipped); assert.NotNil(t, dl, "the case's permanent error") {
		assert.Equal(t, consumer+": order gone", dl.Header.Get(natsx.HeaderDLError))
	}
	if dl := deadLetter(t, js, events.SubjectOrderRefundRequested); assert.NotNil(t, dl, "a subject without a case") {
		assert.Equal(t, consumer+": unexpected subject "+events.SubjectOrderRefundRequested, dl.Header.Get(natsx.HeaderDLError))
	}
}

func TestSwitchRefusesTwoCasesForOneSubject(t *testing.T) {
	use := func(context.Context, inbox.Message, events.OrderShipped) error { return nil }
	assert.PanicsWithValue(t, "natsx.Switch c: two cases for subject "+events.SubjectOrderShipped, func() {
		natsx.Switch("c", natsx.Errors{}, natsx.Case(use), natsx.Case(use))
	})
}

func TestOnMessageMarksAndNamesTheErrors(t *testing.T) {
	errBad := errors.New("bad order id")
	h := natsx.OnMessage("fire", natsx.Errors{Permanent: []error{errBad}}, func(context.Context, jetstream.Msg) error {
		return fmt.Errorf("fire o.1: %w", errBad)
	})
	err := h(context.Background(), nil)
	assert.True(t, natsx.IsPermanent(err))
	assert.EqualError(t, err, "fire: fire o.1: bad order id")
	assert.NoError(t, natsx.OnMessage("fire", natsx.Errors{}, func(context.Context, jetstream.Msg) error { return nil })(context.Background(), nil))
}

// TestCombinedRunsTwiceTheBatch: a combined consumer runs twice the batch in handlers, so one
// half gathers the next batch while the other's commits, and leaves four times that unacked.
func TestCombinedRunsTwiceTheBatch(t *testing.T) {
	s := natsx.ConsumerSpec{Stream: "S", Durable: "d"}.Combined(128)
	assert.Equal(t, 256, s.Workers)
	assert.Equal(t, 1024, s.MaxAckPending)
	assert.Equal(t, "d", s.Durable, "the rest of the spec kept")
}
