package app

import (
	"context"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// RefundOrder restocks a refunded order — unshipped units back to available, returned goods
// back to on_hand — and emits stock.restocked. A second refund is a reported no-op.
func (s *Service) RefundOrder(ctx context.Context, in *Inbound, orderID, operator string) (Resolution, error) {
	var res Resolution
	dup, err := s.inTx(ctx, in, func(tx *postgres.Tx) ([]events.Event, error) {
		var err error
		res, err = resolve(ctx, tx, orderID, operator, (*stock.Lock).Refund)
		if err != nil || !res.Applied {
			return nil, err
		}
		return []events.Event{events.StockRestocked{OrderID: orderID}}, nil
	})
	res.Duplicate = dup
	return res, err
}
