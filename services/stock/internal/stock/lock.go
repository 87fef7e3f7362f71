package stock

import (
	"fmt"
	"time"
)

// LockState is the closed set of states of a lock row (LockStates; ParseLockState).
type LockState string

// Lock states. A lock resolves at most once: locked → sold | released. A sold lock may then be
// shipped or refunded; a shipped one refunded (goods returned).
const (
	StateLocked   LockState = "locked"
	StateSold     LockState = "sold"
	StateReleased LockState = "released"
	StateShipped  LockState = "shipped"
	StateRefunded LockState = "refunded"
)

// Lock is the reservation of one SKU by one order.
type Lock struct {
	orderID  string
	sku      string
	qty      Qty
	state    LockState
	deadline time.Time
}

// RestoreLock rebuilds a Lock from storage; ErrUnknownValue for a state outside LockStates.
func RestoreLock(orderID, sku string, qty int64, state string, deadline time.Time) (*Lock, error) {
	q, err := NewQty(qty)
	if err != nil {
		return nil, fmt.Errorf("restore lock %s/%s: %w", orderID, sku, err)
	}
	st, err := ParseLockState(state)
	if err != nil {
		return nil, fmt.Errorf("restore lock %s/%s: %w", orderID, sku, err)
	}
	return &Lock{orderID: orderID, sku: sku, qty: q, state: st, deadline: deadline}, nil
}

func (l *Lock) OrderID() string     { return l.orderID }
func (l *Lock) SKU() string         { return l.sku }
func (l *Lock) Qty() Qty            { return l.qty }
func (l *Lock) State() LockState    { return l.state }
func (l *Lock) Deadline() time.Time { return l.deadline }

// Overdue reports whether the lock is still held after its deadline.
func (l *Lock) Overdue(now time.Time) bool { return l.state == StateLocked && !now.Before(l.deadline) }

func (l *Lock) movement(t ChangeType, d Quantities, remark string) Movement {
	return Movement{SKU: l.sku, Type: t, Qty: l.qty, OrderID: l.orderID, Delta: d, Remark: remark}
}

func (l *Lock) resolved() error {
	return fmt.Errorf("%w: %s/%s is %s", ErrAlreadyResolved, l.orderID, l.sku, l.state)
}

// Sell turns a held lock into sold. A lock already released (a payment that arrived late) is
// taken again from available and sold in one movement; the caller's conditional update decides
// whether stock allows it. Any other state returns ErrAlreadyResolved.
func (l *Lock) Sell() (Movement, error) {
	n := l.qty.n
	switch l.state {
	case StateLocked:
		l.state = StateSold
		return l.movement(ChangeSell, Quantities{Locked: -n, Sold: n}, ""), nil
	case StateReleased:
		l.state = StateSold
		return l.movement(ChangeSell, Quantities{Sold: n}, "late payment: re-locked from available"), nil
	default:
		return Movement{}, l.resolved()
	}
}

// ReleaseCancel returns a held lock to available for a cancellation, at any time.
func (l *Lock) ReleaseCancel() (Movement, error) { return l.release(ChangeReleaseCancel) }

// ReleaseTimeout returns a held lock to available because its deadline has passed on now,
// stock's own clock: the timeout service's clock may run ahead. Before the deadline it returns
// a *NotYetDueError (errors.Is ErrNotYetDue) and changes nothing. A lock no longer held
// returns ErrAlreadyResolved, whatever the time.
func (l *Lock) ReleaseTimeout(now time.Time) (Movement, error) {
	if l.state == StateLocked && now.Before(l.deadline) {
		return Movement{}, &NotYetDueError{OrderID: l.orderID, SKU: l.sku, Wait: l.deadline.Sub(now)}
	}
	return l.release(ChangeReleaseTimeout)
}

func (l *Lock) release(t ChangeType) (Movement, error) {
	if l.state != StateLocked {
		return Movement{}, l.resolved()
	}
	l.state = StateReleased
	return l.movement(t, Quantities{Locked: -l.qty.n}, ""), nil
}

// NotYetDueError is ErrNotYetDue for one lock: Wait is how long until its deadline, on the
// clock ReleaseTimeout was given.
type NotYetDueError struct {
	OrderID, SKU string
	Wait         time.Duration
}

func (e *NotYetDueError) Error() string {
	return fmt.Sprintf("%s: %s/%s is due in %s", ErrNotYetDue, e.OrderID, e.SKU, e.Wait)
}

// Is makes errors.Is(err, ErrNotYetDue) hold.
func (e *NotYetDueError) Is(target error) bool { return target == ErrNotYetDue }

// Ship takes sold units out of the warehouse: sold and on_hand drop.
func (l *Lock) Ship() (Movement, error) {
	if l.state != StateSold {
		return Movement{}, fmt.Errorf("%w: ship %s/%s in state %s", ErrLockNotHeld, l.orderID, l.sku, l.state)
	}
	l.state = StateShipped
	return l.movement(ChangeShip, Quantities{Sold: -l.qty.n, OnHand: -l.qty.n}, ""), nil
}

// Refund restocks a refunded order: unshipped units go from sold back to available, shipped
// units that came back raise on_hand.
func (l *Lock) Refund() (Movement, error) {
	n := l.qty.n
	switch l.state {
	case StateSold:
		l.state = StateRefunded
		return l.movement(ChangeRefundRestock, Quantities{Sold: -n}, "refund before shipping"), nil
	case StateShipped:
		l.state = StateRefunded
		return l.movement(ChangeRefundRestock, Quantities{OnHand: n}, "refund of returned goods"), nil
	case StateRefunded:
		return Movement{}, l.resolved()
	default:
		return Movement{}, fmt.Errorf("%w: refund %s/%s in state %s", ErrLockNotHeld, l.orderID, l.sku, l.state)
	}
}
