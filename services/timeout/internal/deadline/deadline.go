// Package deadline is the timeout service's domain: an order's payment deadline and how it
// resolves — expired when the deadline passes first, cancelled when stock sold or released
// the order first. A deadline resolves at most once. It imports no infrastructure.
package deadline

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the domain. Callers match them with errors.Is.
var (
	// ErrNotDue: the deadline has not passed yet.
	ErrNotDue = errors.New("deadline not due")
	// ErrResolved: the deadline already expired or was cancelled.
	ErrResolved = errors.New("deadline already resolved")
	// ErrBadOrderID: the order id cannot name a deadline (nor a NATS subject token).
	ErrBadOrderID = errors.New("bad order id")
	// ErrNotFound: no deadline for the order.
	ErrNotFound = errors.New("deadline not found")
)

// State is where a deadline is: scheduled, expired or cancelled. The zero State is invalid.
type State struct{ name string }

// States. scheduled → expired | cancelled; both are final.
var (
	Scheduled = State{"scheduled"}
	Expired   = State{"expired"}
	Cancelled = State{"cancelled"}
)

func (s State) String() string { return s.name }

// ParseState returns the State named s.
func ParseState(s string) (State, error) {
	for _, st := range []State{Scheduled, Expired, Cancelled} {
		if st.name == s {
			return st, nil
		}
	}
	return State{}, fmt.Errorf("unknown deadline state %q", s)
}

// Resolution says what resolved a deadline.
const (
	ResolutionTimeout  = "timeout"  // the deadline passed: expired
	ResolutionSold     = "sold"     // stock.sold: the order was paid
	ResolutionReleased = "released" // stock.released: cancelled or released otherwise
)

// Deadline is one order's payment deadline. Build a new one with Schedule or
// CancelledBeforeLock and a stored one with Restore.
type Deadline struct {
	orderID    string
	at         time.Time // zero only for a deadline cancelled before its lock arrived
	state      State
	resolution string
	createdAt  time.Time
	updatedAt  time.Time
}

func checkOrderID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("%w %q", ErrBadOrderID, id)
	}
	for _, r := range id {
		if r <= ' ' || r == '.' || r == '*' || r == '>' || r > 0x7e {
			return fmt.Errorf("%w %q: not a subject token", ErrBadOrderID, id)
		}
	}
	return nil
}

// Schedule returns the scheduled deadline at of order orderID.
func Schedule(orderID string, at, now time.Time) (*Deadline, error) {
	if err := checkOrderID(orderID); err != nil {
		return nil, err
	}
	if at.IsZero() {
		return nil, fmt.Errorf("schedule %s: zero deadline", orderID)
	}
	return &Deadline{orderID: orderID, at: at.UTC(), state: Scheduled, createdAt: now, updatedAt: now}, nil
}

// CancelledBeforeLock returns the deadline of an order resolved (resolution) before its
// stock.locked arrived: cancelled from the start, so the late lock schedules nothing.
func CancelledBeforeLock(orderID, resolution string, now time.Time) (*Deadline, error) {
	if err := checkOrderID(orderID); err != nil {
		return nil, err
	}
	return &Deadline{orderID: orderID, state: Cancelled, resolution: resolution, createdAt: now, updatedAt: now}, nil
}

// Snapshot is a deadline's state as plain values, for storage and views.
type Snapshot struct {
	OrderID    string
	At         time.Time
	State      State
	Resolution string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Restore rebuilds a stored deadline. It trusts s: the database's constraints guard it.
func Restore(s Snapshot) *Deadline {
	return &Deadline{orderID: s.OrderID, at: s.At, state: s.State, resolution: s.Resolution, createdAt: s.CreatedAt, updatedAt: s.UpdatedAt}
}

// Snapshot returns d's state.
func (d *Deadline) Snapshot() Snapshot {
	return Snapshot{OrderID: d.orderID, At: d.at, State: d.state, Resolution: d.resolution, CreatedAt: d.createdAt, UpdatedAt: d.updatedAt}
}

// OrderID returns the order the deadline is for.
func (d *Deadline) OrderID() string { return d.orderID }

// At returns the deadline (zero for one cancelled before its lock arrived).
func (d *Deadline) At() time.Time { return d.at }

// State returns the deadline's state.
func (d *Deadline) State() State { return d.state }

// Expire resolves a scheduled deadline whose time has come: scheduled → expired. It returns
// a *NotDueError (errors.Is ErrNotDue) when now is before the deadline and ErrResolved when
// it is no longer scheduled; d is unchanged then.
func (d *Deadline) Expire(now time.Time) error {
	if d.state != Scheduled {
		return fmt.Errorf("expire %s: %w (%s)", d.orderID, ErrResolved, d.state)
	}
	if now.Before(d.at) {
		return &NotDueError{OrderID: d.orderID, At: d.at, Wait: d.at.Sub(now)}
	}
	d.state, d.resolution, d.updatedAt = Expired, ResolutionTimeout, now
	return nil
}

// Cancel resolves a scheduled deadline because the order was resolved otherwise:
// scheduled → cancelled, changed=true. An expired or cancelled deadline is left as it is
// (changed=false): whichever resolution came first stands.
func (d *Deadline) Cancel(resolution string, now time.Time) (changed bool) {
	if d.state != Scheduled {
		return false
	}
	d.state, d.resolution, d.updatedAt = Cancelled, resolution, now
	return true
}

// ScheduleAt is when the deadline's scheduled message should fire: the deadline rounded up
// to the whole second (schedules have second resolution), so that it never fires early.
func (d *Deadline) ScheduleAt() time.Time {
	t := d.at.Truncate(time.Second)
	if t.Before(d.at) {
		t = t.Add(time.Second)
	}
	return t
}

// NotDueError is ErrNotDue for one deadline: Wait is how long until it is due, on the clock
// Expire was given (a fire early by another clock — the NATS server's — waits that long).
type NotDueError struct {
	OrderID string
	At      time.Time
	Wait    time.Duration
}

func (e *NotDueError) Error() string {
	return fmt.Sprintf("expire %s: %s: due at %s, in %s", e.OrderID, ErrNotDue, e.At.Format(time.RFC3339Nano), e.Wait)
}

// Is makes errors.Is(err, ErrNotDue) hold.
func (e *NotDueError) Is(target error) bool { return target == ErrNotDue }
