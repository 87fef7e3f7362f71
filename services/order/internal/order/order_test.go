package order_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/order/internal/order"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func item(t *testing.T, sku string, qty, price int64) order.Item {
	t.Helper()
	it, err := order.NewItem(sku, qty, price)
	require.NoError(t, err)
	return it
}

func newOrder(t *testing.T) *order.Order {
	t.Helper()
	o, err := order.New("o1", "u1", []order.Item{item(t, "CUP-1", 2, 4900), item(t, "MUG-2", 1, 100)}, "CNY", 30*time.Minute, t0)
	require.NoError(t, err)
	return o
}

// inStatus returns a copy of a new order restored in status st.
func inStatus(t *testing.T, st order.Status) *order.Order {
	t.Helper()
	s := newOrder(t).Snapshot()
	s.Status = st.String()
	o, err := order.Restore(s)
	require.NoError(t, err)
	return o
}

func TestNewComputesTotalAndDeadline(t *testing.T) {
	o := newOrder(t)
	assert.Equal(t, order.Pending, o.Status())
	assert.Equal(t, order.Money(9900), o.Total())
	assert.Equal(t, t0.Add(30*time.Minute), o.ExpiresAt())
	require.Len(t, o.History(), 1)
	assert.Equal(t, order.HistoryEntry{Status: order.Pending, At: t0, Reason: "order placed"}, o.History()[0])
}

func TestNewRefusesInvalidInput(t *testing.T) {
	good := func(t *testing.T) []order.Item { return []order.Item{item(t, "CUP-1", 1, 1)} }
	many := func(n int) func(t *testing.T) []order.Item {
		return func(t *testing.T) []order.Item {
			items := make([]order.Item, n)
			for i := range items {
				items[i] = item(t, fmt.Sprintf("SKU-%d", i), 1, 1)
			}
			return items
		}
	}
	tests := []struct {
		name     string
		id       string
		buyer    string
		items    func(t *testing.T) []order.Item
		currency string
		timeout  time.Duration
		want     error
	}{
		{"empty id", "", "u1", good, "CNY", time.Minute, order.ErrInvalidID},
		{"id with a dot", "a.b", "u1", good, "CNY", time.Minute, order.ErrInvalidID},
		{"empty buyer", "o1", "", good, "CNY", time.Minute, order.ErrInvalidBuyer},
		{"long buyer", "o1", strings.Repeat("b", order.MaxBuyerIDLen+1), good, "CNY", time.Minute, order.ErrInvalidBuyer},
		{"buyer with newline", "o1", "u\n1", good, "CNY", time.Minute, order.ErrInvalidBuyer},
		{"no items", "o1", "u1", func(*testing.T) []order.Item { return nil }, "CNY", time.Minute, order.ErrInvalidItems},
		{"too many items", "o1", "u1", many(order.MaxItems + 1), "CNY", time.Minute, order.ErrInvalidItems},
		{"duplicate sku", "o1", "u1", func(t *testing.T) []order.Item {
			return []order.Item{item(t, "CUP-1", 1, 1), item(t, "CUP-1", 2, 1)}
		}, "CNY", time.Minute, order.ErrDuplicateSKU},
		{"line total overflows", "o1", "u1", func(t *testing.T) []order.Item {
			return []order.Item{item(t, "CUP-1", 2, math.MaxInt64/2+1)}
		}, "CNY", time.Minute, order.ErrTotalOverflow},
		{"sum overflows", "o1", "u1", func(t *testing.T) []order.Item {
			return []order.Item{item(t, "CUP-1", 1, math.MaxInt64), item(t, "CUP-2", 1, 1)}
		}, "CNY", time.Minute, order.ErrTotalOverflow},
		{"lower-case currency", "o1", "u1", good, "cny", time.Minute, order.ErrInvalidCurrency},
		{"short currency", "o1", "u1", good, "CN", time.Minute, order.ErrInvalidCurrency},
		{"timeout below 1s", "o1", "u1", good, "CNY", 999 * time.Millisecond, order.ErrInvalidTimeout},
		{"timeout above 24h", "o1", "u1", good, "CNY", 24*time.Hour + time.Second, order.ErrInvalidTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := order.New(tc.id, tc.buyer, tc.items(t), tc.currency, tc.timeout, t0)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestNewAcceptsTheLimits(t *testing.T) {
	items := make([]order.Item, order.MaxItems)
	for i := range items {
		items[i] = item(t, fmt.Sprintf("SKU-%d", i), order.MaxQty, 0)
	}
	_, err := order.New("o1", "u1", items, "USD", order.MinPaymentTimeout, t0)
	assert.NoError(t, err)
	_, err = order.New("o1", "u1", items[:1], "USD", order.MaxPaymentTimeout, t0)
	assert.NoError(t, err)
	_, err = order.New("o1", "u1", []order.Item{item(t, "A", 1, math.MaxInt64)}, "USD", time.Hour, t0)
	assert.NoError(t, err, "a total of exactly MaxInt64 fits")
}

func TestNewItemRefusesInvalidLines(t *testing.T) {
	tests := []struct {
		name  string
		sku   string
		qty   int64
		price int64
		want  error
	}{
		{"empty sku", "", 1, 1, order.ErrInvalidSKU},
		{"sku over 64 chars", strings.Repeat("A", 65), 1, 1, order.ErrInvalidSKU},
		{"sku with space", "CUP 1", 1, 1, order.ErrInvalidSKU},
		{"sku starting with a dash", "-CUP", 1, 1, order.ErrInvalidSKU},
		{"zero qty", "CUP-1", 0, 1, order.ErrInvalidQty},
		{"negative qty", "CUP-1", -1, 1, order.ErrInvalidQty},
		{"qty over the limit", "CUP-1", order.MaxQty + 1, 1, order.ErrInvalidQty},
		{"negative price", "CUP-1", 1, -1, order.ErrInvalidPrice},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := order.NewItem(tc.sku, tc.qty, tc.price)
			assert.ErrorIs(t, err, tc.want)
		})
	}
	_, err := order.NewItem(strings.Repeat("A", 64), order.MaxQty, 0)
	assert.NoError(t, err, "64-char SKU, MaxQty and a free item are fine")
}

func TestRestoreRoundTripsAndRejectsCorruption(t *testing.T) {
	o := newOrder(t)
	_, err := o.RequestCancel(t0.Add(time.Minute), "changed my mind")
	require.NoError(t, err)
	back, err := order.Restore(o.Snapshot())
	require.NoError(t, err)
	assert.Equal(t, o.Snapshot(), back.Snapshot())

	bad := o.Snapshot()
	bad.Total++
	_, err = order.Restore(bad)
	assert.ErrorContains(t, err, "stored total")

	bad = o.Snapshot()
	bad.Status = "lost"
	_, err = order.Restore(bad)
	assert.ErrorContains(t, err, "unknown order status")
}

// action is one transition applied to an order, as the app would.
type action struct {
	name  string
	apply func(o *order.Order) (bool, error)
}

var (
	at          = t0.Add(time.Minute)
	actCancel   = action{"request cancel", func(o *order.Order) (bool, error) { return o.RequestCancel(at, "") }}
	actRefund   = action{"request refund", func(o *order.Order) (bool, error) { return o.RequestRefund(at, "") }}
	actShip     = action{"ship", func(o *order.Order) (bool, error) { return o.Ship(at) }}
	actLocked   = action{"stock locked", func(o *order.Order) (bool, error) { return o.StockLocked(at) }}
	actRejected = action{"stock lock rejected", func(o *order.Order) (bool, error) { return o.StockLockRejected(at, "insufficient_stock") }}
	actSold     = action{"stock sold", func(o *order.Order) (bool, error) { return o.StockSold(at, false) }}
	actFailed   = action{"stock sell failed", func(o *order.Order) (bool, error) { return o.StockSellFailed(at, "p1", "released") }}
	actFailedAP = action{"stock sell failed (already paid)", func(o *order.Order) (bool, error) {
		return o.StockSellFailed(at, "p2", order.SellFailedAlreadyPaid)
	}}
	actTimeout  = action{"stock released (timeout)", func(o *order.Order) (bool, error) { return o.StockReleased(at, order.ReleaseTimeout) }}
	actCancelRl = action{"stock released (cancel)", func(o *order.Order) (bool, error) { return o.StockReleased(at, order.ReleaseCancel) }}
	actRefunded = action{"payment refunded", func(o *order.Order) (bool, error) { return o.PaymentRefunded(at, "p1") }}
	actNothing  = action{"nothing to refund", func(o *order.Order) (bool, error) { return o.NothingToRefund(at) }}
)

// outcome is what an action does from one status. Statuses an action's table leaves out
// are refused with ErrInvalidTransition.
type outcome struct {
	to      order.Status
	changed bool
}

func TestTransitionsFromEveryStatus(t *testing.T) {
	P, A, R, Pd, C, X, S, RP, Rf := order.Pending, order.AwaitingPayment, order.Rejected, order.Paid, order.Closed,
		order.Cancelled, order.Shipped, order.RefundPending, order.Refunded
	tests := []struct {
		action  action
		allowed map[order.Status]outcome
	}{
		// Cancel keeps the status: stock's release decides.
		{actCancel, map[order.Status]outcome{P: {P, true}, A: {A, true}, X: {X, false}}},
		{actRefund, map[order.Status]outcome{Pd: {RP, true}, S: {RP, true}, RP: {RP, false}, Rf: {Rf, false}}},
		{actShip, map[order.Status]outcome{Pd: {S, true}, S: {S, false}}},
		{actLocked, map[order.Status]outcome{P: {A, true}, A: {A, false}}},
		{actRejected, map[order.Status]outcome{P: {R, true}, R: {R, false}}},
		// From refund_pending and refunded only for an order never sold before (inStatus's history
		// has no sale): see TestSoldAfterARefundOfAnOrderSoldBeforeIsStale.
		{actSold, map[order.Status]outcome{P: {Pd, true}, A: {Pd, true}, C: {Pd, true}, X: {Pd, true}, Pd: {Pd, false},
			RP: {Pd, true}, Rf: {Pd, true}}},
		{actFailed, map[order.Status]outcome{P: {RP, true}, A: {RP, true}, C: {RP, true}, X: {RP, true}, R: {RP, true},
			Pd: {Pd, true}, S: {S, true}, RP: {RP, true}, Rf: {Rf, true}}},
		{actTimeout, map[order.Status]outcome{P: {C, true}, A: {C, true}, C: {C, false}, X: {X, false}}},
		{actCancelRl, map[order.Status]outcome{P: {X, true}, A: {X, true}, C: {C, false}, X: {X, false}}},
		// Another payment sold the order: noted in every status, never a refund of the order.
		{actFailedAP, map[order.Status]outcome{P: {P, true}, A: {A, true}, C: {C, true}, X: {X, true}, R: {R, true},
			Pd: {Pd, true}, S: {S, true}, RP: {RP, true}, Rf: {Rf, true}}},
		// A refund completes an unsold order (it may overtake stock.sell_failed) and is only
		// noted on one that is or may be sold (an extra payment's refund).
		{actRefunded, map[order.Status]outcome{RP: {Rf, true}, C: {Rf, true}, X: {Rf, true}, R: {Rf, true}, Rf: {Rf, false},
			P: {P, true}, A: {A, true}, Pd: {Pd, true}, S: {S, true}}},
		// No payment paid the order (it was sold by hand): its refund completes (review F12).
		{actNothing, map[order.Status]outcome{RP: {Rf, true}, Rf: {Rf, false}}},
	}
	for _, tc := range tests {
		for _, from := range order.Statuses() {
			want, allowed := tc.allowed[from]
			t.Run(tc.action.name+" from "+from.String(), func(t *testing.T) {
				o := inStatus(t, from)
				before := len(o.History())
				changed, err := tc.action.apply(o)
				if !allowed {
					assert.ErrorIs(t, err, order.ErrInvalidTransition)
					assert.ErrorContains(t, err, from.String(), "the error names the current status")
					assert.False(t, changed)
					assert.Equal(t, from, o.Status())
					assert.Len(t, o.History(), before, "a refused transition writes no history")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, want.changed, changed)
				assert.Equal(t, want.to, o.Status())
				if want.changed {
					require.Len(t, o.History(), before+1)
					last := o.History()[before]
					assert.Equal(t, want.to, last.Status)
					assert.Equal(t, at, last.At)
					assert.NotEmpty(t, last.Reason)
				} else {
					assert.Len(t, o.History(), before, "a repeat writes no history")
				}
			})
		}
	}
}

func TestRepeatedRequestsChangeNothing(t *testing.T) {
	for _, tc := range []struct {
		from   order.Status
		action action
	}{
		{order.Pending, actCancel},
		{order.AwaitingPayment, actCancel},
		{order.Paid, actRefund},
		{order.Paid, actShip},
		{order.Pending, actLocked},
		{order.AwaitingPayment, actSold},
		{order.AwaitingPayment, actTimeout},
	} {
		t.Run(tc.action.name+" twice from "+tc.from.String(), func(t *testing.T) {
			o := inStatus(t, tc.from)
			changed, err := tc.action.apply(o)
			require.NoError(t, err)
			require.True(t, changed)
			snap := o.Snapshot()
			changed, err = tc.action.apply(o)
			require.NoError(t, err)
			assert.False(t, changed)
			assert.Equal(t, snap, o.Snapshot())
		})
	}
}

func TestCancelThenLockThenReleaseEndsCancelled(t *testing.T) {
	o := newOrder(t)
	changed, err := o.RequestCancel(at, "buyer")
	require.NoError(t, err)
	require.True(t, changed)
	assert.Equal(t, at, o.CancelRequestedAt())
	_, err = o.StockLocked(at)
	require.NoError(t, err)
	changed, err = o.RequestCancel(at, "buyer")
	require.NoError(t, err)
	assert.False(t, changed, "cancel already requested while pending")
	_, err = o.StockReleased(at, order.ReleaseCancel)
	require.NoError(t, err)
	assert.Equal(t, order.Cancelled, o.Status())
	var statuses []string
	for _, h := range o.History() {
		statuses = append(statuses, h.Status.String())
	}
	assert.Equal(t, []string{"pending", "pending", "awaiting_payment", "cancelled"}, statuses)
}

func TestNoteKeepsStatus(t *testing.T) {
	for _, st := range order.Statuses() {
		o := inStatus(t, st)
		o.Note(at, "stock restocked")
		assert.Equal(t, st, o.Status())
		assert.Equal(t, order.HistoryEntry{Status: st, At: at, Reason: "stock restocked"}, o.History()[len(o.History())-1])
	}
}

func TestReasonIsBounded(t *testing.T) {
	for name, reason := range map[string]string{
		"too long":     strings.Repeat("r", order.MaxReasonLen+1),
		"NUL":          "a\x00b",
		"invalid UTF8": "a\xffb",
	} {
		o := newOrder(t)
		_, err := o.RequestCancel(at, reason)
		assert.ErrorIs(t, err, order.ErrInvalidReason, name)
		assert.True(t, o.CancelRequestedAt().IsZero(), name)
		_, err = o.RequestRefund(at, reason)
		assert.ErrorIs(t, err, order.ErrInvalidReason, name)
	}
}

func TestParseReleaseReason(t *testing.T) {
	r, err := order.ParseReleaseReason("timeout")
	require.NoError(t, err)
	assert.Equal(t, order.ReleaseTimeout, r)
	_, err = order.ParseReleaseReason("gone")
	assert.True(t, errors.Is(err, order.ErrUnknownReleaseReason))
}

func TestNoteClipsLongReasons(t *testing.T) {
	o := newOrder(t)
	o.Note(at, strings.Repeat("é", order.MaxReasonLen)) // 2 bytes each
	got := o.History()[len(o.History())-1].Reason
	assert.LessOrEqual(t, len(got), order.MaxReasonLen)
	assert.True(t, utf8.ValidString(got))
}

func TestRefundOvertakingSellFailureWhileUnresolvedEndsRefunded(t *testing.T) {
	o := newOrder(t)
	at := time.Now()
	_, err := o.StockLocked(at)
	require.NoError(t, err)
	_, err = o.PaymentRefunded(at, "pay-1") // overtakes: noted as an extra payment
	require.NoError(t, err)
	require.Equal(t, order.AwaitingPayment, o.Status())
	_, err = o.StockReleased(at, order.ReleaseTimeout)
	require.NoError(t, err)
	_, err = o.StockSellFailed(at, "pay-1", "insufficient_stock")
	require.NoError(t, err)
	assert.Equal(t, order.Refunded, o.Status(), "the refund already happened: the order must not wait in refund_pending")

	other := newOrder(t)
	_, err = other.StockLocked(at)
	require.NoError(t, err)
	_, err = other.StockReleased(at, order.ReleaseTimeout)
	require.NoError(t, err)
	_, err = other.StockSellFailed(at, "pay-2", "insufficient_stock")
	require.NoError(t, err)
	assert.Equal(t, order.RefundPending, other.Status(), "no refund seen yet")
}

// TestSecondPaymentAlreadyPaidThenSoldEndsPaid is review F4's test: stock sold the order under
// p1 and refused p2 with already_paid; the refusal reached the order first.
func TestSecondPaymentAlreadyPaidThenSoldEndsPaid(t *testing.T) {
	o := inStatus(t, order.AwaitingPayment)
	changed, err := o.StockSellFailed(at, "p2", order.SellFailedAlreadyPaid)
	require.NoError(t, err)
	assert.True(t, changed, "noted")
	assert.Equal(t, order.AwaitingPayment, o.Status())
	changed, err = o.StockSold(at, false)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, order.Paid, o.Status())
}

// TestDoublePaymentEndsPaidInEveryArrivalOrder: a double payment's three outcomes — the sale of
// the first payment (stock.sold), the refusal of the second (stock.sell_failed already_paid)
// and the second's refund (payment.refunded) — reach the order in any order, each possibly
// twice; the order ends paid, from awaiting_payment and from a closed or cancelled order that a
// late payment re-sold.
func TestDoublePaymentEndsPaidInEveryArrivalOrder(t *testing.T) {
	outcomes := map[string]func(o *order.Order, relocked bool) (bool, error){
		"sold": func(o *order.Order, relocked bool) (bool, error) { return o.StockSold(at, relocked) },
		"sell_failed": func(o *order.Order, _ bool) (bool, error) {
			return o.StockSellFailed(at, "p2", order.SellFailedAlreadyPaid)
		},
		"refunded": func(o *order.Order, _ bool) (bool, error) { return o.PaymentRefunded(at, "p2") },
	}
	orders := [][]string{
		{"sold", "sell_failed", "refunded"}, {"sold", "refunded", "sell_failed"},
		{"sell_failed", "sold", "refunded"}, {"sell_failed", "refunded", "sold"},
		{"refunded", "sold", "sell_failed"}, {"refunded", "sell_failed", "sold"},
	}
	for _, from := range []order.Status{order.AwaitingPayment, order.Pending, order.Closed, order.Cancelled} {
		for _, seq := range orders {
			t.Run(from.String()+"/"+strings.Join(seq, ","), func(t *testing.T) {
				o := inStatus(t, from)
				relocked := from == order.Closed || from == order.Cancelled
				for _, name := range seq {
					_, err := outcomes[name](o, relocked)
					require.NoError(t, err, name)
					_, err = outcomes[name](o, relocked) // a redelivery, or the fact reported twice
					require.NoError(t, err, name+" again")
				}
				assert.Equal(t, order.Paid, o.Status())
				changed, err := o.Ship(at)
				require.NoError(t, err)
				assert.True(t, changed, "the sold order can ship")
			})
		}
	}
}

// TestExtraPaymentRefundDoesNotCompleteARequestedRefund: the order was paid by p1, the buyer
// asked for the refund, and the refund of the extra payment p2 arrives first: the order waits
// for p1's.
func TestExtraPaymentRefundDoesNotCompleteARequestedRefund(t *testing.T) {
	o := inStatus(t, order.AwaitingPayment)
	_, err := o.StockSold(at, false)
	require.NoError(t, err)
	_, err = o.StockSellFailed(at, "p2", order.SellFailedAlreadyPaid)
	require.NoError(t, err)
	_, err = o.RequestRefund(at, "buyer")
	require.NoError(t, err)
	_, err = o.PaymentRefunded(at, "p2")
	require.NoError(t, err)
	assert.Equal(t, order.RefundPending, o.Status())
	_, err = o.PaymentRefunded(at, "p1")
	require.NoError(t, err)
	assert.Equal(t, order.Refunded, o.Status())
}

// TestSoldAfterARefundOfAnOrderSoldBeforeIsStale: an order paid, refunded on request, then a
// redelivered stock.sold: refused, the order stays refunded.
func TestSoldAfterARefundOfAnOrderSoldBeforeIsStale(t *testing.T) {
	o := inStatus(t, order.AwaitingPayment)
	_, err := o.StockSold(at, false)
	require.NoError(t, err)
	_, err = o.RequestRefund(at, "buyer")
	require.NoError(t, err)
	_, err = o.StockSold(at, false)
	require.ErrorIs(t, err, order.ErrInvalidTransition, "from refund_pending")
	_, err = o.PaymentRefunded(at, "p1")
	require.NoError(t, err)
	_, err = o.StockSold(at, false)
	require.ErrorIs(t, err, order.ErrInvalidTransition, "from refunded")
	assert.Equal(t, order.Refunded, o.Status())
}

// TestLateSaleAfterAnotherLatePaymentWasRefunded: a closed order, a late payment p1 that found
// no stock and was refunded, then a late payment p3 that re-sold it: the order is paid.
func TestLateSaleAfterAnotherLatePaymentWasRefunded(t *testing.T) {
	o := inStatus(t, order.Closed)
	_, err := o.StockSellFailed(at, "p1", "insufficient_stock")
	require.NoError(t, err)
	_, err = o.PaymentRefunded(at, "p1")
	require.NoError(t, err)
	require.Equal(t, order.Refunded, o.Status())
	_, err = o.StockSold(at, true)
	require.NoError(t, err)
	assert.Equal(t, order.Paid, o.Status())
}

// Reconciliation sends a pending order's order.created again at most once per wait, and
// never for an order that left pending.
func TestRepublishCreatedWaitsForItsCopy(t *testing.T) {
	at := t0
	o := newOrder(t)
	assert.True(t, o.RepublishCreated(at, time.Minute))
	assert.False(t, o.RepublishCreated(at.Add(59*time.Second), time.Minute), "within the wait")
	assert.True(t, o.RepublishCreated(at.Add(time.Minute), time.Minute), "after it")
	_, err := o.StockLocked(at.Add(2 * time.Minute))
	require.NoError(t, err)
	assert.False(t, o.RepublishCreated(at.Add(time.Hour), time.Minute), "no longer pending")
	assert.Len(t, o.History(), 4, "created, two copies, locked")
}
