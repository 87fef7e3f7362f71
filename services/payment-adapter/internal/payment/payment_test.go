package payment_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

var now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func note(mod func(*payment.Notification)) payment.Notification {
	n := payment.Notification{Provider: "sandbox", ProviderTxnID: "txn-1", OrderID: "ord-1", Amount: 9800, Currency: "CNY", Outcome: payment.OutcomeSucceeded}
	if mod != nil {
		mod(&n)
	}
	return n
}

func TestRecordDecidesTheOutcomeAgainstTheOrderTotal(t *testing.T) {
	order := payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}
	tests := []struct {
		name       string
		n          payment.Notification
		wantStatus payment.Status
		wantReason string
	}{
		{"exact total succeeds", note(nil), payment.Succeeded, ""},
		{"provider failure is declined", note(func(n *payment.Notification) { n.Outcome = payment.OutcomeFailed }), payment.Failed, payment.ReasonDeclined},
		{"less than the total fails", note(func(n *payment.Notification) { n.Amount = 9700 }), payment.Failed, payment.ReasonAmountMismatch},
		{"more than the total fails", note(func(n *payment.Notification) { n.Amount = 9900 }), payment.Failed, payment.ReasonAmountMismatch},
		{"other currency fails", note(func(n *payment.Notification) { n.Currency = "EUR" }), payment.Failed, payment.ReasonCurrencyMismatch},
		{"currency is checked before amount", note(func(n *payment.Notification) { n.Currency, n.Amount = "EUR", 1 }), payment.Failed, payment.ReasonCurrencyMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := payment.Record("pay-1", tc.n, order, now)
			require.NoError(t, err)
			assert.Equal(t, tc.wantStatus, p.Status())
			assert.Equal(t, tc.wantReason, p.FailureReason())
			assert.True(t, p.Matches(tc.n), "a notification matches the payment it made")
		})
	}
}

func TestRecordRejectsInvalidNotifications(t *testing.T) {
	order := payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}
	for name, n := range map[string]payment.Notification{
		"zero amount":      note(func(n *payment.Notification) { n.Amount = 0 }),
		"negative amount":  note(func(n *payment.Notification) { n.Amount = -5 }),
		"lowercase ccy":    note(func(n *payment.Notification) { n.Currency = "cny" }),
		"empty txn":        note(func(n *payment.Notification) { n.ProviderTxnID = "" }),
		"txn with a space": note(func(n *payment.Notification) { n.ProviderTxnID = "a b" }),
		"no outcome":       note(func(n *payment.Notification) { n.Outcome = payment.Outcome{} }),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := payment.Record("pay-1", n, order, now)
			assert.ErrorIs(t, err, payment.ErrMalformedNotification)
		})
	}
}

func TestDuplicateWithOtherContentDoesNotMatch(t *testing.T) {
	p, err := payment.Record("pay-1", note(nil), payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}, now)
	require.NoError(t, err)
	assert.False(t, p.Matches(note(func(n *payment.Notification) { n.Amount = 1 })))
	assert.False(t, p.Matches(note(func(n *payment.Notification) { n.Outcome = payment.OutcomeFailed })))
}

// TestSucceedAfterDecline is review F11's second point: a provider may report a transaction
// failed and later succeeded (a buyer trying again on the same Stripe PaymentIntent). Only a
// declined payment becomes what the success makes of it; every other repeat changes nothing.
func TestSucceedAfterDecline(t *testing.T) {
	order := payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}
	failed := func(n *payment.Notification) { n.Outcome = payment.OutcomeFailed }
	tests := []struct {
		name       string
		first, now payment.Notification
		changed    bool
		wantStatus payment.Status
		wantReason string
	}{
		{"declined, then succeeded", note(failed), note(nil), true, payment.Succeeded, ""},
		{"declined, then succeeded for less", note(failed), note(func(n *payment.Notification) { n.Amount = 9700 }), true, payment.Failed, payment.ReasonAmountMismatch},
		{"declined twice", note(failed), note(failed), false, payment.Failed, payment.ReasonDeclined},
		{"succeeded, then declined", note(nil), note(failed), false, payment.Succeeded, ""},
		{"succeeded twice", note(nil), note(nil), false, payment.Succeeded, ""},
		{"a mismatch, then succeeded", note(func(n *payment.Notification) { n.Amount = 1 }), note(nil), false, payment.Failed, payment.ReasonAmountMismatch},
		{"declined, then succeeded for another order", note(failed), note(func(n *payment.Notification) { n.OrderID = "ord-2" }), false, payment.Failed, payment.ReasonDeclined},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := payment.Record("pay-1", tc.first, order, now)
			require.NoError(t, err)
			later := now.Add(time.Minute)
			changed, err := p.SucceedAfterDecline(tc.now, order, later)
			require.NoError(t, err)
			assert.Equal(t, tc.changed, changed)
			assert.Equal(t, tc.wantStatus, p.Status())
			assert.Equal(t, tc.wantReason, p.FailureReason())
			assert.Equal(t, "pay-1", p.ID(), "the same payment")
			if tc.changed {
				assert.Equal(t, tc.now.Amount, p.Amount())
				assert.True(t, p.Matches(tc.now), "it is now what the success made")
			}
		})
	}
}

func TestRefundOnceThenNoChange(t *testing.T) {
	p, err := payment.Record("pay-1", note(nil), payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}, now)
	require.NoError(t, err)
	changed, err := p.RequestRefund("sell_failed", now.Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, payment.Succeeded, p.Status(), "requested: the money is not back yet")
	require.Equal(t, payment.RefundRequested, p.Refund().State)
	assert.Equal(t, "refund-pay-1", p.Refund().ID)

	changed, err = p.RequestRefund("again", now.Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, changed, "one refund per payment")

	changed, err = p.ApplyRefundResult(payment.RefundResult{ProviderRefundID: "re-1", Status: payment.RefundSucceeded}, now.Add(2*time.Minute))
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, payment.Refunded, p.Status())
	assert.Equal(t, now.Add(2*time.Minute), p.Refund().At)
	changed, err = p.RequestRefund("again", now.Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, changed, "a refunded payment is not refunded again")
	assert.Equal(t, "sell_failed", p.Refund().Reason)
}

// TestRefundResultsInEveryOrder: the provider's answers to the request, its notifications and
// the job's queries arrive in any order; a refund moves forward only, and succeeded wins.
func TestRefundResultsInEveryOrder(t *testing.T) {
	pending := payment.RefundResult{ProviderRefundID: "re-1", Status: payment.RefundPending}
	done := payment.RefundResult{ProviderRefundID: "re-1", Status: payment.RefundSucceeded}
	failed := payment.RefundResult{Status: payment.RefundFailed, Reason: "account closed"}
	tests := []struct {
		name    string
		results []payment.RefundResult
		want    payment.RefundState
		status  payment.Status
	}{
		{"pending then succeeded", []payment.RefundResult{pending, done}, payment.RefundDone, payment.Refunded},
		{"succeeded then a late pending", []payment.RefundResult{done, pending}, payment.RefundDone, payment.Refunded},
		{"succeeded then failed", []payment.RefundResult{done, failed}, payment.RefundDone, payment.Refunded},
		{"pending then failed", []payment.RefundResult{pending, failed}, payment.RefundRefused, payment.Succeeded},
		{"failed then a late pending", []payment.RefundResult{failed, pending}, payment.RefundRefused, payment.Succeeded},
		{"failed then succeeded: the money is back", []payment.RefundResult{failed, done}, payment.RefundDone, payment.Refunded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := payment.Record("pay-1", note(nil), payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}, now)
			require.NoError(t, err)
			_, err = p.RequestRefund("r", now)
			require.NoError(t, err)
			for _, res := range tc.results {
				_, err := p.ApplyRefundResult(res, now)
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, p.Refund().State)
			assert.Equal(t, tc.status, p.Status())
			changed, err := p.ApplyRefundResult(tc.results[len(tc.results)-1], now)
			require.NoError(t, err)
			assert.False(t, changed, "the same answer again changes nothing")
		})
	}
}

func TestRefundResultErrors(t *testing.T) {
	p, err := payment.Record("pay-1", note(nil), payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}, now)
	require.NoError(t, err)
	_, err = p.ApplyRefundResult(payment.RefundResult{Status: payment.RefundSucceeded}, now)
	assert.Error(t, err, "no refund was requested")
	_, err = p.RequestRefund("r", now)
	require.NoError(t, err)
	_, err = p.ApplyRefundResult(payment.RefundResult{}, now)
	assert.Error(t, err, "a result without a status")
	assert.Equal(t, payment.RefundRequested, p.Refund().State)
}

func TestRefundAttemptFailedCountsOnlyWhileRequested(t *testing.T) {
	p, err := payment.Record("pay-1", note(nil), payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}, now)
	require.NoError(t, err)
	assert.False(t, p.RefundAttemptFailed("boom", now, now), "no refund")
	_, err = p.RequestRefund("r", now)
	require.NoError(t, err)
	assert.True(t, p.RefundAttemptFailed("timeout", now, now.Add(time.Second)))
	assert.True(t, p.RefundAttemptFailed("timeout again", now, now.Add(2*time.Second)))
	assert.Equal(t, 2, p.Refund().Attempts)
	assert.Equal(t, "timeout again", p.Refund().LastError)
	assert.Equal(t, now.Add(2*time.Second), p.Refund().NextAttemptAt)
	_, err = p.ApplyRefundResult(payment.RefundResult{Status: payment.RefundPending}, now)
	require.NoError(t, err)
	assert.False(t, p.RefundAttemptFailed("late", now, now), "pending: the provider has it")
	assert.True(t, p.Refund().NextAttemptAt.IsZero())
}

func TestDeclinedPaymentIsNotRefundable(t *testing.T) {
	p, err := payment.Record("pay-1", note(func(n *payment.Notification) { n.Outcome = payment.OutcomeFailed }), payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}, now)
	require.NoError(t, err)
	assert.False(t, p.CapturedMismatch(), "declined: the provider took nothing")
	_, err = p.RequestRefund("r", now)
	assert.ErrorIs(t, err, payment.ErrNotRefundable)
	assert.Nil(t, p.Refund())
}

// TestMismatchedPaymentIsRefundable (F11): the provider captured 1 fen of a 9,800-fen order;
// it never paid the order, but the money must go back.
func TestMismatchedPaymentIsRefundable(t *testing.T) {
	p, err := payment.Record("pay-1", note(func(n *payment.Notification) { n.Amount = 1 }), payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}, now)
	require.NoError(t, err)
	require.Equal(t, payment.Failed, p.Status())
	assert.True(t, p.CapturedMismatch())
	changed, err := p.RequestRefund(payment.ReasonAmountMismatch, now)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.True(t, p.CapturedMismatch(), "still failed until the money is back")
	changed, err = p.ApplyRefundResult(payment.RefundResult{Status: payment.RefundSucceeded}, now)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, payment.Refunded, p.Status())
	assert.Empty(t, p.FailureReason(), "the reason is the refund's now")
	assert.False(t, p.CapturedMismatch())
}

func TestRegistry(t *testing.T) {
	r, err := payment.NewRegistry()
	require.NoError(t, err)
	_, err = r.Provider("stripe")
	assert.ErrorIs(t, err, payment.ErrUnknownProvider)
	_, err = r.Refunder("stripe")
	assert.ErrorIs(t, err, payment.ErrUnknownProvider)
}

// TestRedriveWaitsForItsCopy: reconciliation re-publishes payment.succeeded at most once per
// wait, numbering the copies, and never for a payment no longer succeeded.
func TestRedriveWaitsForItsCopy(t *testing.T) {
	p, err := payment.Record("pay-1", note(nil), payment.OrderTotal{OrderID: "ord-1", Total: 9800, Currency: "CNY"}, now)
	require.NoError(t, err)
	n, err := p.Redrive(now.Add(time.Minute), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = p.Redrive(now.Add(time.Minute+59*time.Second), time.Minute)
	assert.ErrorIs(t, err, payment.ErrRedriveWaiting)
	n, err = p.Redrive(now.Add(2*time.Minute), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	got, last, waiting := p.RedriveWaiting(now.Add(2*time.Minute+59*time.Second), time.Minute)
	assert.Equal(t, 2, got)
	assert.Equal(t, now.Add(2*time.Minute), last)
	assert.True(t, waiting)
	_, _, waiting = p.RedriveWaiting(now.Add(3*time.Minute), time.Minute)
	assert.False(t, waiting, "the wait is over")
	assert.Equal(t, 2, payment.Restore(p.Snapshot()).Snapshot().Redrives, "kept through storage")

	_, err = p.RequestRefund("sell_failed", now.Add(3*time.Minute))
	require.NoError(t, err)
	_, err = p.ApplyRefundResult(payment.RefundResult{ProviderRefundID: "re-1", Status: payment.RefundSucceeded}, now.Add(3*time.Minute))
	require.NoError(t, err)
	_, err = p.Redrive(now.Add(time.Hour), time.Minute)
	assert.ErrorIs(t, err, payment.ErrNotSucceeded)
}
