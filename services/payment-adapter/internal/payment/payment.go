// Package payment is payment-adapter's domain: what a provider's verified notification means
// for an order (a succeeded or failed payment), the one refund a succeeded payment may get,
// and the Provider interface every payment provider (sandbox today; Stripe, WeChat Pay v3,
// Alipay later) implements. It imports no infrastructure.
package payment

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Errors of the domain. Callers match them with errors.Is.
var (
	// ErrUnknownProvider: no provider of that name is registered.
	ErrUnknownProvider = errors.New("unknown payment provider")
	// ErrInvalidSignature: the notification's signature is missing or does not verify.
	ErrInvalidSignature = errors.New("invalid signature")
	// ErrMalformedNotification: the notification is authentic but not a notification
	// this adapter understands (bad JSON, unknown or missing fields, bad values).
	ErrMalformedNotification = errors.New("malformed notification")
	// ErrOrderUnknown: the notification names an order payment-adapter has not seen
	// (order.created not consumed yet, or an order that does not exist).
	ErrOrderUnknown = errors.New("order unknown")
	// ErrNotFound: no such payment.
	ErrNotFound = errors.New("payment not found")
	// ErrNotRefundable: the payment did not succeed, so there is no money to give back.
	ErrNotRefundable = errors.New("payment not refundable")
	// ErrIgnoredNotification: an authentic notification of a kind the adapter does not act
	// on; acknowledged, nothing stored.
	ErrIgnoredNotification = errors.New("notification ignored")
	// ErrProviderRefused: the provider answered that a request can never succeed.
	ErrProviderRefused = errors.New("provider refused")
)

// Failure reasons of a failed payment.
const (
	ReasonDeclined         = "declined"          // the provider reported the payment failed
	ReasonAmountMismatch   = "amount_mismatch"   // paid amount is not the order's total
	ReasonCurrencyMismatch = "currency_mismatch" // paid currency is not the order's
)

// Status is the state of a payment: succeeded, failed or refunded. The zero Status is invalid.
type Status struct{ name string }

// Payment statuses. succeeded → refunded, and failed → refunded for a payment whose money the
// provider captured although it did not pay the order (CapturedMismatch), are the only
// transitions.
var (
	Succeeded = Status{"succeeded"}
	Failed    = Status{"failed"}
	Refunded  = Status{"refunded"}
)

func (s Status) String() string { return s.name }

// ParseStatus returns the Status named s.
func ParseStatus(s string) (Status, error) {
	for _, st := range []Status{Succeeded, Failed, Refunded} {
		if st.name == s {
			return st, nil
		}
	}
	return Status{}, fmt.Errorf("unknown payment status %q", s)
}

// Outcome is what a provider says happened to a payment attempt.
type Outcome struct{ name string }

// Notification outcomes.
var (
	OutcomeSucceeded = Outcome{"succeeded"}
	OutcomeFailed    = Outcome{"failed"}
)

func (o Outcome) String() string { return o.name }

// ParseOutcome returns the Outcome named s ("succeeded", "failed").
func ParseOutcome(s string) (Outcome, error) {
	switch s {
	case OutcomeSucceeded.name:
		return OutcomeSucceeded, nil
	case OutcomeFailed.name:
		return OutcomeFailed, nil
	}
	return Outcome{}, fmt.Errorf("%w: status %q is neither succeeded nor failed", ErrMalformedNotification, s)
}

// Notification is a provider's verified statement about one payment attempt, in the adapter's
// terms. Provider implementations build it; Validate checks it.
type Notification struct {
	Provider      string
	ProviderTxnID string // the provider's id of the transaction: unique per provider
	OrderID       string
	Amount        int64  // minor units
	Currency      string // ISO 4217
	Outcome       Outcome
	Reason        string    // the provider's failure reason, if it gives one
	PaidAt        time.Time // when the provider says it was paid; zero when it does not say
	// Refund, when set, makes this a refund's confirmation rather than a payment's outcome:
	// the provider reports where the refund of the payment ProviderTxnID stands. OrderID,
	// Amount, Currency and Outcome may then be unset (Validate does not require them).
	Refund *RefundNotice
}

// RefundNotice is a provider's notification about one refund of a payment.
type RefundNotice struct {
	RefundID         string // ours, when the provider echoes it (WeChat out_refund_no, Alipay out_biz_no, Stripe metadata refund_id)
	ProviderRefundID string
	Status           RefundStatus
}

var (
	currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)
	idRE       = regexp.MustCompile(`^[A-Za-z0-9_:\-]{1,128}$`)
)

// Validate returns an error wrapping ErrMalformedNotification for a notification that cannot
// be recorded.
func (n Notification) Validate() error {
	var errs []error
	if n.Provider == "" {
		errs = append(errs, errors.New("no provider"))
	}
	if !idRE.MatchString(n.ProviderTxnID) {
		errs = append(errs, fmt.Errorf("provider_txn_id %q must be 1-128 of [A-Za-z0-9_:-]", n.ProviderTxnID))
	}
	if r := n.Refund; r != nil {
		if r.ProviderRefundID == "" && r.RefundID == "" {
			errs = append(errs, errors.New("refund notice without a refund id"))
		}
		if r.Status != RefundPending && r.Status != RefundSucceeded && r.Status != RefundFailed {
			errs = append(errs, errors.New("refund notice without a status"))
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformedNotification, err)
		}
		return nil
	}
	if !idRE.MatchString(n.OrderID) {
		errs = append(errs, fmt.Errorf("order_id %q must be 1-128 of [A-Za-z0-9_:-]", n.OrderID))
	}
	if n.Amount <= 0 {
		errs = append(errs, fmt.Errorf("amount %d must be a positive number of minor units", n.Amount))
	}
	if !currencyRE.MatchString(n.Currency) {
		errs = append(errs, fmt.Errorf("currency %q must be an ISO 4217 code", n.Currency))
	}
	if n.Outcome != OutcomeSucceeded && n.Outcome != OutcomeFailed {
		errs = append(errs, errors.New("no outcome"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedNotification, err)
	}
	return nil
}

// OrderTotal is payment-adapter's copy of what an order must be paid: its total and currency,
// taken from order.created.
type OrderTotal struct {
	OrderID  string
	Total    int64
	Currency string
	// Traceparent is the W3C trace context of the order.created ("" when unknown): the trace
	// of a callback for the order links to it.
	Traceparent string
}

// Refund is the one refund of a payment (refunds are whole: the order service refunds whole
// orders, and stock sells whole orders).
type Refund struct {
	ID               string // our refund id: also the provider's idempotency key (out_refund_no)
	ProviderRefundID string
	Reason           string
	At               time.Time
}

// Payment is one provider transaction for an order. Fields are unexported: build a new one
// with Record, and a stored one with Restore.
type Payment struct {
	id            string
	orderID       string
	provider      string
	providerTxnID string
	amount        int64
	currency      string
	status        Status
	failureReason string
	refund        *Refund
	createdAt     time.Time
	updatedAt     time.Time
}

// Record decides what the verified notification n means for order o and returns the new
// payment with id: failed (ReasonDeclined, or the provider's reason) when the provider says
// so; failed with ReasonCurrencyMismatch or ReasonAmountMismatch when the money does not match
// the order's total — never succeeded then; succeeded otherwise. It returns
// ErrMalformedNotification for an invalid n and an error when o is not n's order.
func Record(id string, n Notification, o OrderTotal, now time.Time) (*Payment, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, errors.New("record payment: empty id")
	}
	if o.OrderID != n.OrderID {
		return nil, fmt.Errorf("record payment: order %s is not the notification's %s", o.OrderID, n.OrderID)
	}
	p := &Payment{
		id: id, orderID: n.OrderID, provider: n.Provider, providerTxnID: n.ProviderTxnID,
		amount: n.Amount, currency: n.Currency, status: Succeeded, createdAt: now, updatedAt: now,
	}
	switch {
	case n.Outcome == OutcomeFailed:
		p.status, p.failureReason = Failed, ReasonDeclined
		if n.Reason != "" {
			p.failureReason = ReasonDeclined + ": " + n.Reason
		}
	case n.Currency != o.Currency:
		p.status, p.failureReason = Failed, ReasonCurrencyMismatch
	case n.Amount != o.Total:
		p.status, p.failureReason = Failed, ReasonAmountMismatch
	}
	return p, nil
}

// Snapshot is a payment's state as plain values, for storage and views.
type Snapshot struct {
	ID            string
	OrderID       string
	Provider      string
	ProviderTxnID string
	Amount        int64
	Currency      string
	Status        Status
	FailureReason string
	Refund        *Refund
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Restore rebuilds a stored payment. It trusts s: the database's constraints guard it.
func Restore(s Snapshot) *Payment {
	var r *Refund
	if s.Refund != nil {
		cp := *s.Refund
		r = &cp
	}
	return &Payment{
		id: s.ID, orderID: s.OrderID, provider: s.Provider, providerTxnID: s.ProviderTxnID,
		amount: s.Amount, currency: s.Currency, status: s.Status, failureReason: s.FailureReason,
		refund: r, createdAt: s.CreatedAt, updatedAt: s.UpdatedAt,
	}
}

// Snapshot returns p's state.
func (p *Payment) Snapshot() Snapshot {
	s := Snapshot{
		ID: p.id, OrderID: p.orderID, Provider: p.provider, ProviderTxnID: p.providerTxnID,
		Amount: p.amount, Currency: p.currency, Status: p.status, FailureReason: p.failureReason,
		CreatedAt: p.createdAt, UpdatedAt: p.updatedAt,
	}
	if p.refund != nil {
		r := *p.refund
		s.Refund = &r
	}
	return s
}

// ID returns the payment id (ours, not the provider's).
func (p *Payment) ID() string { return p.id }

// OrderID returns the order the payment is for.
func (p *Payment) OrderID() string { return p.orderID }

// Provider returns the name of the provider that took the payment.
func (p *Payment) Provider() string { return p.provider }

// ProviderTxnID returns the provider's transaction id.
func (p *Payment) ProviderTxnID() string { return p.providerTxnID }

// Amount returns the amount paid, in minor units.
func (p *Payment) Amount() int64 { return p.amount }

// Currency returns the currency paid.
func (p *Payment) Currency() string { return p.currency }

// Status returns the payment's status.
func (p *Payment) Status() Status { return p.status }

// FailureReason returns why a failed payment failed ("" otherwise).
func (p *Payment) FailureReason() string { return p.failureReason }

// Refund returns the payment's refund, or nil.
func (p *Payment) Refund() *Refund {
	if p.refund == nil {
		return nil
	}
	r := *p.refund
	return &r
}

// Matches reports whether n describes the same payment attempt as p (a true duplicate
// notification) rather than a conflicting one under the same provider transaction id.
func (p *Payment) Matches(n Notification) bool {
	declined := p.status == Failed && p.failureReason != ReasonAmountMismatch && p.failureReason != ReasonCurrencyMismatch
	return p.provider == n.Provider && p.providerTxnID == n.ProviderTxnID && p.orderID == n.OrderID &&
		p.amount == n.Amount && p.currency == n.Currency && declined == (n.Outcome == OutcomeFailed)
}

// CapturedMismatch reports whether p failed only because its amount or currency was not the
// order's: the provider said succeeded and holds the money, but it never paid the order. Such
// a payment must go back to the buyer.
func (p *Payment) CapturedMismatch() bool {
	return p.status == Failed && (p.failureReason == ReasonAmountMismatch || p.failureReason == ReasonCurrencyMismatch)
}

// MarkRefunded records r as the payment's refund: succeeded → refunded, changed=true; also a
// CapturedMismatch payment, whose failure reason then is the refund's (r.Reason). A payment
// already refunded is left as it is (changed=false, nil): refunds are idempotent. Any other
// failed payment took no money and returns ErrNotRefundable.
func (p *Payment) MarkRefunded(r Refund) (changed bool, err error) {
	switch {
	case p.status == Refunded:
		return false, nil
	case p.status == Succeeded, p.CapturedMismatch():
		if r.ID == "" || r.At.IsZero() {
			return false, fmt.Errorf("refund payment %s: refund without id or time", p.id)
		}
		p.status, p.failureReason, p.refund, p.updatedAt = Refunded, "", &r, r.At
		return true, nil
	}
	return false, fmt.Errorf("refund payment %s: %w: it is %s", p.id, ErrNotRefundable, p.status)
}
