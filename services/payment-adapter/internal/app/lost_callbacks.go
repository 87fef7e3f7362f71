package app

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// ListUnpaidOrders returns up to limit remembered orders, oldest first, remembered before
// createdBefore with no succeeded or refunded payment, whose payment deadline is after
// deadlineAfter (or, remembered without a deadline, remembered after createdAfter).
func (s *Service) ListUnpaidOrders(ctx context.Context, createdBefore, deadlineAfter, createdAfter time.Time, limit int) ([]payment.OrderTotal, error) {
	orders, err := s.store.ListUnpaidOrders(ctx, createdBefore, deadlineAfter, createdAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("list unpaid orders: %w", err)
	}
	return orders, nil
}

// Queriers returns the names of the providers that can be asked for an order's payment.
func (s *Service) Queriers() []string { return s.providers.Queriers() }

// QueryPayment asks provider what became of orderID's payment (payment.Querier). It returns
// an error wrapping payment.ErrNotFound when the provider has none, and one wrapping
// payment.ErrMalformedNotification when the provider's answer is not a valid notification of
// that provider for that order (never recorded, then).
func (s *Service) QueryPayment(ctx context.Context, provider, orderID string) (payment.Notification, error) {
	q, err := s.providers.Querier(provider)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("query %s payment of order %s: %w", provider, orderID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, providerTimeout)
	defer cancel()
	n, err := q.QueryPayment(ctx, orderID)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("query %s payment of order %s: %w", provider, orderID, err)
	}
	if err := n.Validate(); err != nil {
		return payment.Notification{}, fmt.Errorf("query %s payment of order %s: %w", provider, orderID, err)
	}
	if n.Provider != provider || n.OrderID != orderID || n.Refund != nil {
		return payment.Notification{}, fmt.Errorf("query %s payment of order %s: %w: the answer is of provider %q, order %q",
			provider, orderID, payment.ErrMalformedNotification, n.Provider, n.OrderID)
	}
	return n, nil
}

// ApplyQueriedPayment records a payment a provider's query found (QueryPayment) exactly as
// its lost callback would have been (HandleCallback): the same recording, outcome event and
// refund of a wrong amount, and a provider transaction recorded before — the callback came
// after all, or an earlier run applied it — is a duplicate that changes nothing.
func (s *Service) ApplyQueriedPayment(ctx context.Context, n payment.Notification) (CallbackResult, error) {
	res, err := s.record(ctx, n, "query")
	if err != nil {
		return CallbackResult{}, fmt.Errorf("apply queried payment %s/%s of order %s: %w", n.Provider, n.ProviderTxnID, n.OrderID, err)
	}
	return res, nil
}
