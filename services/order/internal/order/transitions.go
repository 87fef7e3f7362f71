package order

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Requests: what the buyer or an operator asks for. Each returns changed=true when the
// request is new and its event must be emitted, changed=false (nil error) when the same
// request was already made, and ErrInvalidTransition when the status does not allow it.

// RequestCancel asks stock to release an unpaid order. Allowed while pending or
// awaiting_payment; the status stays until stock reports the release (stock.released with
// reason cancel → cancelled), because a payment may still win the race for the locks. A
// second request, or one on a cancelled order, changes nothing.
func (o *Order) RequestCancel(at time.Time, reason string) (changed bool, err error) {
	if err := checkReason(reason); err != nil {
		return false, err
	}
	switch {
	case o.status == Cancelled:
		return false, nil
	case !o.status.in(Pending, AwaitingPayment):
		return false, o.refuse("cancel")
	case !o.cancelRequestedAt.IsZero():
		return false, nil
	}
	o.cancelRequestedAt = at.UTC()
	o.record(o.status, at, withReason("cancel requested", reason))
	return true, nil
}

// RequestRefund moves a paid or shipped order to refund_pending; stock restocks it and
// payment-adapter pays the money back. On an order already refund_pending or refunded it
// changes nothing.
func (o *Order) RequestRefund(at time.Time, reason string) (changed bool, err error) {
	if err := checkReason(reason); err != nil {
		return false, err
	}
	switch {
	case o.status.in(RefundPending, Refunded):
		return false, nil
	case !o.status.in(Paid, Shipped):
		return false, o.refuse("refund")
	}
	o.record(RefundPending, at, withReason("refund requested", reason))
	return true, nil
}

// Ship moves a paid order to shipped. On a shipped order it changes nothing.
func (o *Order) Ship(at time.Time) (changed bool, err error) {
	switch {
	case o.status == Shipped:
		return false, nil
	case o.status != Paid:
		return false, o.refuse("ship")
	}
	o.record(Shipped, at, "shipped")
	return true, nil
}

// Outcomes: what other services report. Each returns changed=true when it moved the order or
// added a history entry, changed=false (nil error) when the order already reflects it (a
// redelivery, or the same fact reported twice), and ErrInvalidTransition when it is stale or
// contradicts the order (the caller logs and drops it: retrying would never help).

// StockLocked: every line is locked; pending → awaiting_payment.
func (o *Order) StockLocked(at time.Time) (changed bool, err error) {
	switch o.status {
	case Pending:
		o.record(AwaitingPayment, at, "stock locked")
		return true, nil
	case AwaitingPayment:
		return false, nil
	}
	// Typically stale: stock.sold or stock.released overtook it and the order moved on.
	return false, o.refuse("lock stock of")
}

// StockLockRejected: stock could not lock the order; pending → rejected.
func (o *Order) StockLockRejected(at time.Time, reason string) (changed bool, err error) {
	switch o.status {
	case Pending:
		o.record(Rejected, at, withReason("stock lock rejected", reason))
		return true, nil
	case Rejected:
		return false, nil
	}
	return false, o.refuse("reject")
}

// StockSold: the buyer paid and the locks became sold → paid. Allowed from awaiting_payment;
// from pending (stock.sold overtook stock.locked); and from closed or cancelled, where a late
// payment took the released stock again (relocked). Also from refund_pending and refunded
// when the order was never sold: stock sells an order at most once, so this sale is real and
// the refund was of other payments that failed to sell — an extra payment whose refund
// overtook this report, or a late payment that found no stock before another re-sold the
// order (review F4); the order must not end refunded while a payment is kept and its stock
// sold. A rejected order never held locks, so stock cannot sell it; that, and any other
// status, is refused — on an order that was sold before, a stock.sold is stale.
func (o *Order) StockSold(at time.Time, relocked bool) (changed bool, err error) {
	if o.status.in(RefundPending, Refunded) && !o.wasSold() {
		o.record(Paid, at, "payment received, stock sold; the refunds were of other payments")
		return true, nil
	}
	switch o.status {
	case Pending, AwaitingPayment, Closed, Cancelled:
		reason := "payment received, stock sold"
		if relocked {
			reason = "late payment received, stock locked again and sold"
		}
		o.record(Paid, at, reason)
		return true, nil
	case Paid:
		return false, nil
	}
	return false, o.refuse("sell")
}

// SellFailedAlreadyPaid is stock.sell_failed's reason for a payment that came after another
// payment had sold the order (services/stock/internal/stock.SellFailedAlreadyPaid).
const SellFailedAlreadyPaid = "already_paid"

// StockSellFailed: a payment arrived that stock could not fulfil; the money must go back.
//
// Reason SellFailedAlreadyPaid means another payment sold the order: this one is an extra
// payment (a double submit), which payment-adapter refunds on its own. The order keeps its
// status in every status and only notes it, so that the sale's stock.sold — which may arrive
// before or after this report, and whose payment.refunded may arrive before either — moves
// it to paid, and the extra payment's refund never completes it (PaymentRefunded). A repeat
// of the note changes nothing.
//
// Any other reason: an order that had not been sold (pending, awaiting_payment, closed,
// cancelled, rejected) moves to refund_pending, or straight to refunded when this payment's
// payment.refunded overtook the report. An order that is already paid, shipped or being
// refunded keeps its status: the failed sale was a second payment of it, which
// payment-adapter refunds on its own; the order only notes it.
func (o *Order) StockSellFailed(at time.Time, paymentID, reason string) (changed bool, err error) {
	what := "payment could not be fulfilled"
	if paymentID != "" {
		what = fmt.Sprintf("payment %s could not be fulfilled", paymentID)
	}
	if reason == SellFailedAlreadyPaid {
		if o.extraPayment(paymentID) {
			return false, nil
		}
		o.record(o.status, at, withReason(extraPaymentReason(paymentID), reason))
		return true, nil
	}
	switch o.status {
	case Pending, AwaitingPayment, Closed, Cancelled, Rejected:
		if o.paymentRefunded(paymentID) {
			// payment.refunded overtook this report while the order was still unresolved
			// (it was noted as an extra payment): the money is already back.
			o.record(Refunded, at, withReason(what+" (already refunded)", reason))
			return true, nil
		}
		o.record(RefundPending, at, withReason(what, reason))
		return true, nil
	default:
		// Paid, shipped or refund_pending: an extra payment. Refunded: the refund overtook
		// this report (see PaymentRefunded).
		o.record(o.status, at, withReason(what+" (refunded separately)", reason))
		return true, nil
	}
}

// extraPayment reports whether the history records paymentID as an extra payment: one that
// stock refused because another payment had sold the order.
func (o *Order) extraPayment(paymentID string) bool {
	if paymentID == "" {
		return false
	}
	return o.historyHas(extraPaymentReason(paymentID))
}

func extraPaymentReason(paymentID string) string {
	if paymentID == "" {
		return "extra payment, the order was sold by another (refunded separately)"
	}
	return fmt.Sprintf("payment %s is an extra payment, the order was sold by another (refunded separately)", paymentID)
}

// wasSold reports whether the order was ever paid: stock sold it before.
func (o *Order) wasSold() bool {
	for _, h := range o.history {
		if h.Status.in(Paid, Shipped) {
			return true
		}
	}
	return false
}

// historyHas reports whether a history entry's reason starts with prefix.
func (o *Order) historyHas(prefix string) bool {
	for _, h := range o.history {
		if strings.HasPrefix(h.Reason, prefix) {
			return true
		}
	}
	return false
}

// paymentRefunded reports whether the history records the refund of paymentID.
func (o *Order) paymentRefunded(paymentID string) bool {
	if paymentID == "" {
		return false
	}
	return o.historyHas(refundedReason(paymentID))
}

func refundedReason(paymentID string) string { return fmt.Sprintf("payment %s refunded", paymentID) }

// ReleaseReason says why stock released an order's locks.
type ReleaseReason struct{ name string }

// Release reasons.
var (
	ReleaseTimeout = ReleaseReason{"timeout"}
	ReleaseCancel  = ReleaseReason{"cancel"}
)

// ErrUnknownReleaseReason is returned by ParseReleaseReason for anything but timeout or cancel.
var ErrUnknownReleaseReason = errors.New("unknown release reason")

// ParseReleaseReason returns the release reason named s ("timeout", "cancel").
func ParseReleaseReason(s string) (ReleaseReason, error) {
	switch s {
	case ReleaseTimeout.name:
		return ReleaseTimeout, nil
	case ReleaseCancel.name:
		return ReleaseCancel, nil
	}
	return ReleaseReason{}, fmt.Errorf("%w %q", ErrUnknownReleaseReason, s)
}

// StockReleased: the locks went back to stock; pending or awaiting_payment → closed (timeout)
// or cancelled (cancel). An order already closed or cancelled changes nothing. A release
// after the order was paid (or rejected) is stale — stock resolves a lock at most once, so
// the sale won — and is refused.
func (o *Order) StockReleased(at time.Time, why ReleaseReason) (changed bool, err error) {
	switch o.status {
	case Pending, AwaitingPayment:
		switch why {
		case ReleaseTimeout:
			o.record(Closed, at, "payment deadline passed, stock released")
		case ReleaseCancel:
			o.record(Cancelled, at, "cancelled, stock released")
		default:
			return false, fmt.Errorf("release order %s: %w", o.id, ErrUnknownReleaseReason)
		}
		return true, nil
	case Closed, Cancelled:
		return false, nil
	}
	return false, o.refuse("release")
}

// PaymentRefunded: a payment of the order went back to the buyer. refund_pending → refunded.
// It also completes an order that was never sold (closed, cancelled, rejected): the only
// payment refunded for one is a payment whose sale failed, and payment.refunded (PAYMENT
// stream) may overtake that stock.sell_failed (STOCK stream) — the later sell failure is then
// only noted. On an order that is, or may still be, sold (pending, awaiting_payment, paid,
// shipped) the refund was of an extra payment: noted, status kept, because marking the order
// refunded would be wrong. The refund of a payment stock refused as an extra payment
// (StockSellFailed with SellFailedAlreadyPaid) is only noted, whatever the status: another
// payment sold the order. On a refunded order it changes nothing.
//
// When an extra payment's refund overtakes both its stock.sell_failed and the other payment's
// stock.sold on a closed or cancelled order, the order is refunded for a moment: stock.sold
// then moves it to paid (StockSold), so it never ends refunded with a payment kept (F4).
func (o *Order) PaymentRefunded(at time.Time, paymentID string) (changed bool, err error) {
	reason := "payment refunded"
	if paymentID != "" {
		reason = refundedReason(paymentID)
	}
	switch {
	case o.status == Refunded:
		return false, nil
	case o.extraPayment(paymentID):
		o.record(o.status, at, reason+" (extra payment; the order keeps its status)")
	case o.status.in(RefundPending, Closed, Cancelled, Rejected):
		o.record(Refunded, at, reason)
	default:
		o.record(o.status, at, reason+" (extra payment; the order keeps its status)")
	}
	return true, nil
}

// NothingToRefund: payment-adapter holds no payment that paid the order — it was sold by hand —
// so no payment.refunded will come; refund_pending → refunded, the history saying the money,
// if any, goes back outside stockflow (review F12). On a refunded order it changes nothing;
// any other status cannot follow the refund request it answers and is refused.
func (o *Order) NothingToRefund(at time.Time) (changed bool, err error) {
	switch o.status {
	case RefundPending:
		o.record(Refunded, at, "no payment to refund: the order was not paid through stockflow; any money goes back the way it came")
		return true, nil
	case Refunded:
		return false, nil
	}
	return false, o.refuse("complete the refund of")
}

// Note adds a history entry that keeps the status (stock restocked, stock shipped, a
// payment attempt failed). It is allowed in every status.
func (o *Order) Note(at time.Time, reason string) {
	o.record(o.status, at, reason)
}

// republishedNote starts the entry RepublishCreated writes.
const republishedNote = "order.created re-published by reconciliation"

// RepublishWaiting says how many copies of order.created reconciliation sent (n, the last at
// last) and whether at is within wait of the last one: that copy has not had its grace yet.
func (o *Order) RepublishWaiting(at time.Time, wait time.Duration) (n int, last time.Time, waiting bool) {
	for _, h := range o.history {
		if strings.HasPrefix(h.Reason, republishedNote) {
			n, last = n+1, h.At
		}
	}
	return n, last, n > 0 && at.Sub(last) < wait
}

// RepublishCreated records that reconciliation sends order.created again, because stock has
// no record of the order. It refuses (false) when the order is no longer pending, and when
// its last re-publication is younger than wait: stock has not had its grace for that copy
// yet (a stock down for an hour is not sent a copy per reconciliation run). Each entry
// carries its number, so the history tells the attempts apart.
func (o *Order) RepublishCreated(at time.Time, wait time.Duration) bool {
	n, _, waiting := o.RepublishWaiting(at, wait)
	if o.status != Pending || waiting {
		return false
	}
	o.record(o.status, at, fmt.Sprintf("%s (%d): stock had no record of the order", republishedNote, n+1))
	return true
}
