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
	// ErrTxnUnknown: a provider's refund notification names a provider transaction no payment
	// was recorded for (yet: its payment's own notification may still be on its way).
	ErrTxnUnknown = errors.New("provider transaction unknown")
	// ErrNotRefundable: the payment did not succeed, so there is no money to give back.
	ErrNotRefundable = errors.New("payment not refundable")
	// ErrIgnoredNotification: an authentic notification of a kind the adapter does not act
	// on; acknowledged, nothing stored.
	ErrIgnoredNotification = errors.New("notification ignored")
	// ErrProviderRefused: the provider answered that a request can never succeed.
	ErrProviderRefused = errors.New("provider refused")
	// ErrNotSucceeded: the payment is not (or no longer) succeeded.
	ErrNotSucceeded = errors.New("payment not succeeded")
	// ErrRedriveWaiting: a copy of the payment's payment.succeeded went out within its wait.
	ErrRedriveWaiting = errors.New("payment.succeeded re-published recently")
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
// transitions; each happens when the payment's refund succeeds (RefundState).
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
	// PaymentDeadline is when the order's payment is due, from order.created; zero for an
	// order remembered before payment-adapter kept it.
	PaymentDeadline time.Time
	// CreatedAt is when payment-adapter learnt of the order (set by the store).
	CreatedAt time.Time
}

// RefundState is where the one refund of a payment stands on our side: requested (recorded,
// the provider not asked yet, or its answer not known), pending (the provider accepted it, the
// money is not back yet), succeeded (the money is back: the payment is refunded) or failed
// (the provider will not pay it back: for a human). The zero RefundState is invalid.
type RefundState struct{ name string }

// Refund states. requested → pending → succeeded | failed, and requested → succeeded | failed
// directly; a provider's later word that the money is back turns failed into succeeded.
var (
	RefundRequested  = RefundState{"requested"}
	RefundInProgress = RefundState{"pending"}
	RefundDone       = RefundState{"succeeded"}
	RefundRefused    = RefundState{"failed"}
)

func (s RefundState) String() string { return s.name }

// Open reports whether the refund still waits for the provider: requested or pending.
func (s RefundState) Open() bool { return s == RefundRequested || s == RefundInProgress }

// ParseRefundState returns the RefundState named s.
func ParseRefundState(s string) (RefundState, error) {
	for _, st := range []RefundState{RefundRequested, RefundInProgress, RefundDone, RefundRefused} {
		if st.name == s {
			return st, nil
		}
	}
	return RefundState{}, fmt.Errorf("unknown refund state %q", s)
}

// RefundIDOf is the id of payment paymentID's one refund: derived from the payment id, so a
// retry after a crash asks the provider for the same refund again (it is the provider's
// idempotency key), never for a second one.
func RefundIDOf(paymentID string) string { return "refund-" + paymentID }

// Refund is the one refund of a payment (refunds are whole: the order service refunds whole
// orders, and stock sells whole orders).
type Refund struct {
	ID               string // our refund id (RefundIDOf): also the provider's idempotency key
	ProviderRefundID string // the provider's, once it said
	Reason           string
	State            RefundState
	RequestedAt      time.Time
	At               time.Time // when the money was back; zero unless State is RefundDone
	Attempts         int       // provider calls that failed transiently
	NextAttemptAt    time.Time // when the next provider call is due after a failed one; zero: none scheduled
	LastError        string    // the last failed call's error, or why the provider refused
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
	redrives      int       // copies of payment.succeeded re-published by reconciliation
	redrivenAt    time.Time // when the last copy was
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
	Redrives      int
	RedrivenAt    time.Time
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
		refund: r, redrives: s.Redrives, redrivenAt: s.RedrivenAt, createdAt: s.CreatedAt, updatedAt: s.UpdatedAt,
	}
}

// Snapshot returns p's state.
func (p *Payment) Snapshot() Snapshot {
	s := Snapshot{
		ID: p.id, OrderID: p.orderID, Provider: p.provider, ProviderTxnID: p.providerTxnID,
		Amount: p.amount, Currency: p.currency, Status: p.status, FailureReason: p.failureReason,
		Redrives: p.redrives, RedrivenAt: p.redrivenAt, CreatedAt: p.createdAt, UpdatedAt: p.updatedAt,
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

// SucceedAfterDecline applies a later notification n of p's own provider transaction for
// order o. A payment declined before whose transaction has now succeeded — Stripe lets a buyer
// try again on the same PaymentIntent after a failed attempt, under the same id — becomes
// what Record makes of the success: succeeded, or failed with a mismatch of amount or
// currency (CapturedMismatch: the money was taken and must go back). Any other notification
// changes nothing (changed=false): a repeat, a decline after a success or a mismatch, a
// success after a success, and one that names another transaction or order than p's (a
// conflicting repeat, for a human: the caller logs it).
func (p *Payment) SucceedAfterDecline(n Notification, o OrderTotal, at time.Time) (changed bool, err error) {
	if n.Provider != p.provider || n.ProviderTxnID != p.providerTxnID || n.OrderID != p.orderID ||
		n.Outcome != OutcomeSucceeded || p.status != Failed || p.CapturedMismatch() || p.refund != nil {
		return false, nil
	}
	np, err := Record(p.id, n, o, at)
	if err != nil {
		return false, err
	}
	p.amount, p.currency, p.status, p.failureReason, p.updatedAt = np.amount, np.currency, np.status, np.failureReason, at
	return true, nil
}

// Matches reports whether n describes the same payment attempt as p (a true duplicate
// notification) rather than a conflicting one under the same provider transaction id.
func (p *Payment) Matches(n Notification) bool {
	declined := p.status == Failed && p.failureReason != ReasonAmountMismatch && p.failureReason != ReasonCurrencyMismatch
	return p.provider == n.Provider && p.providerTxnID == n.ProviderTxnID && p.orderID == n.OrderID &&
		p.amount == n.Amount && p.currency == n.Currency && declined == (n.Outcome == OutcomeFailed)
}

// Redrive records that the payment's payment.succeeded is published again, because stock
// has not sold its order (the paid_not_sold job), and returns which copy this is (1, 2, …).
// A copy gets the time the first event got: a next one is refused within wait of the last
// (ErrRedriveWaiting), so a stock that is down for an hour is not sent a copy on every run.
// A payment no longer succeeded has nothing to re-drive (ErrNotSucceeded).
func (p *Payment) Redrive(at time.Time, wait time.Duration) (n int, err error) {
	if p.status != Succeeded {
		return 0, fmt.Errorf("%w: payment %s is %s", ErrNotSucceeded, p.id, p.status)
	}
	if n, last, waiting := p.RedriveWaiting(at, wait); waiting {
		return 0, fmt.Errorf("%w: copy %d of payment %s went out at %s", ErrRedriveWaiting, n, p.id, last.Format(time.RFC3339))
	}
	p.redrives, p.redrivenAt, p.updatedAt = p.redrives+1, at, at
	return p.redrives, nil
}

// RedriveWaiting says how many copies of payment.succeeded reconciliation published (n, the
// last at last) and whether at is within wait of the last one: that copy has not had its
// time yet.
func (p *Payment) RedriveWaiting(at time.Time, wait time.Duration) (n int, last time.Time, waiting bool) {
	return p.redrives, p.redrivenAt, p.redrives > 0 && at.Before(p.redrivenAt.Add(wait))
}

// CapturedMismatch reports whether p failed only because its amount or currency was not the
// order's: the provider said succeeded and holds the money, but it never paid the order. Such
// a payment must go back to the buyer.
func (p *Payment) CapturedMismatch() bool {
	return p.status == Failed && (p.failureReason == ReasonAmountMismatch || p.failureReason == ReasonCurrencyMismatch)
}

// PaidOrder reports whether p paid its order: it succeeded, and may have been refunded since.
// A payment captured for the wrong amount or currency never did, refunded or not (its
// refund's reason is its failure reason).
func (p *Payment) PaidOrder() bool {
	switch p.status {
	case Succeeded:
		return true
	case Refunded:
		return p.refund == nil || (p.refund.Reason != ReasonAmountMismatch && p.refund.Reason != ReasonCurrencyMismatch)
	}
	return false
}

// RequestRefund records the request of p's one refund (RefundIDOf(p.ID())) for reason at at:
// changed=true when it is new. A payment whose refund was requested before — in whatever
// state it is, refunded included — changes nothing (changed=false, nil): a payment has one
// refund. Allowed for a succeeded payment and for a CapturedMismatch one; any other failed
// payment took no money and returns ErrNotRefundable.
func (p *Payment) RequestRefund(reason string, at time.Time) (changed bool, err error) {
	switch {
	case p.refund != nil || p.status == Refunded:
		return false, nil
	case p.status != Succeeded && !p.CapturedMismatch():
		return false, fmt.Errorf("refund payment %s: %w: it is %s", p.id, ErrNotRefundable, p.status)
	case at.IsZero():
		return false, fmt.Errorf("refund payment %s: request without time", p.id)
	}
	p.refund = &Refund{ID: RefundIDOf(p.id), Reason: reason, State: RefundRequested, RequestedAt: at}
	p.updatedAt = at
	return true, nil
}

// ApplyRefundResult applies what the provider said of p's refund at at: succeeded completes it
// (the payment becomes refunded; a CapturedMismatch payment's failure reason is then the
// refund's), pending marks it pending, failed marks it failed with res.Reason. It returns
// changed=false when the refund already stands there or further on — a refund that succeeded
// stays succeeded whatever is said later, and a pending answer never takes a refund back from
// failed — and an error when p has no refund.
//
// A succeeded answer for a failed refund completes it: the provider says the money is back,
// which is what matters to the buyer (a human retried it at the provider, say).
func (p *Payment) ApplyRefundResult(res RefundResult, at time.Time) (changed bool, err error) {
	r := p.refund
	if r == nil {
		return false, fmt.Errorf("refund of payment %s: no refund was requested", p.id)
	}
	if res.ProviderRefundID != "" && r.ProviderRefundID == "" {
		r.ProviderRefundID, changed = res.ProviderRefundID, true
	}
	switch {
	case r.State == RefundDone:
		return changed, nil
	case res.Status == RefundSucceeded:
		r.State, r.At, r.NextAttemptAt = RefundDone, at, time.Time{}
		p.status, p.failureReason = Refunded, ""
	case res.Status == RefundPending && r.State == RefundRequested:
		r.State, r.NextAttemptAt = RefundInProgress, time.Time{}
	case res.Status == RefundFailed && r.State.Open():
		r.State, r.NextAttemptAt = RefundRefused, time.Time{}
		r.LastError = res.Reason
		if r.LastError == "" {
			r.LastError = "the provider reported the refund failed"
		}
	case res.Status != RefundPending && res.Status != RefundFailed:
		return false, fmt.Errorf("refund of payment %s: unknown provider refund status %q", p.id, res.Status)
	default:
		if changed {
			p.updatedAt = at
		}
		return changed, nil
	}
	p.updatedAt = at
	return true, nil
}

// RefundAttemptFailed records a provider call for p's requested refund that failed with a
// transient error at at; the next is due at next. It changes nothing unless the refund is
// still requested (a confirmation may have arrived meanwhile).
func (p *Payment) RefundAttemptFailed(callErr string, at, next time.Time) (changed bool) {
	r := p.refund
	if r == nil || r.State != RefundRequested {
		return false
	}
	r.Attempts++
	r.LastError, r.NextAttemptAt = clip(callErr, 500), next
	p.updatedAt = at
	return true
}

// clip shortens s to at most n bytes (an error text for a column), on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
