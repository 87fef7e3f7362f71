package stock_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

func TestDecideSaleAnswersWhatAPaymentDoesToAnOrder(t *testing.T) {
	insufficient := &stock.MovementError{SKU: "A", Type: stock.ChangeSell, Qty: 2, Err: stock.ErrInsufficientStock}
	boom := errors.New("connection lost")
	for _, tc := range []struct {
		name     string
		sellErr  error
		relocked bool
		paidBy   string
		want     stock.Sale
		err      error
	}{
		{name: "held locks are sold now", want: stock.Sale{Sold: true}},
		{name: "released locks are taken again and sold", relocked: true, want: stock.Sale{Sold: true, Relocked: true}},
		{name: "released and the stock is gone: sell_failed insufficient_stock", sellErr: fmt.Errorf("order o: %w", insufficient),
			want: stock.Sale{Failed: stock.SellFailedInsufficient}},
		{name: "a rejected order holds no lock: sell_failed no_lock", sellErr: fmt.Errorf("order o: %w", stock.ErrNoLock),
			want: stock.Sale{Failed: stock.SellFailedNoLock}},
		{name: "sold before by another payment: sell_failed already_paid", sellErr: stock.ErrAlreadyResolved, paidBy: "pay-1",
			want: stock.Sale{Failed: stock.SellFailedAlreadyPaid}},
		{name: "the same payment again changes nothing", sellErr: stock.ErrAlreadyResolved, paidBy: "pay-2", want: stock.Sale{}},
		{name: "an order stock has not seen yet is retried", sellErr: fmt.Errorf("order o: %w (%w)", stock.ErrNoLock, stock.ErrOrderUnknown),
			err: stock.ErrOrderUnknown},
		{name: "any other failure is retried", sellErr: boom, err: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := stock.DecideSale(tc.sellErr, tc.relocked, tc.paidBy, "pay-2")
			assert.ErrorIs(t, err, tc.err)
			if tc.err == nil {
				assert.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
