package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// LostPayment is what FindLostPayment learnt from one provider about one unpaid order.
type LostPayment struct {
	// Found is the payment the provider has for the order; nil when it has none (or only one
	// still waiting for the buyer).
	Found *payment.Notification
	// Known: the adapter had recorded Found already — its callback arrived after all, or an
	// earlier run applied it. Nothing was lost.
	Known bool
	// Applied: this call recorded Found, as its callback would have (repair only).
	Applied bool
	// Payment is the recorded payment of Found when Known or Applied.
	Payment *payment.Payment
}

// FindLostPayment asks provider what became of the payment of orderID (QueryPayment): the
// lost callbacks job's step for one unpaid order and one provider. With repair set, a payment
// the provider has and the adapter does not is recorded through ApplyQueriedPayment — the
// path of its callback: the same payment row, outcome event and refund of a wrong amount, and
// a callback that arrives later is a duplicate. Without repair nothing changes: the order's
// payments are only compared with the provider's answer.
//
// A provider with no payment for the order returns a LostPayment with Found nil and no error.
func (s *Service) FindLostPayment(ctx context.Context, provider, orderID string, repair bool) (LostPayment, error) {
	var lp LostPayment
	n, err := s.QueryPayment(ctx, provider, orderID)
	if errors.Is(err, payment.ErrNotFound) {
		return lp, nil
	}
	if err != nil {
		return lp, fmt.Errorf("find lost payment: %w", err)
	}
	lp.Found = &n
	if repair {
		res, err := s.ApplyQueriedPayment(ctx, n)
		if err != nil {
			return lp, fmt.Errorf("find lost payment: %w", err)
		}
		lp.Payment, lp.Known, lp.Applied = res.Payment, res.Duplicate, !res.Duplicate
		return lp, nil
	}
	ps, err := s.store.ListByOrder(ctx, orderID)
	if err != nil {
		return lp, fmt.Errorf("find lost payment of order %s: %w", orderID, err)
	}
	for _, p := range ps {
		if p.Provider() == n.Provider && p.ProviderTxnID() == n.ProviderTxnID {
			lp.Known, lp.Payment = true, p
			break
		}
	}
	return lp, nil
}
