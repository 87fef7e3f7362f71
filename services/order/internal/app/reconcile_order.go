package app

import (
	"context"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/order/internal/order"
)

// ListStuck returns up to limit orders still pending or awaiting_payment although their
// payment deadline passed before cutoff.
func (s *Service) ListStuck(ctx context.Context, cutoff time.Time, limit int) ([]*order.Order, error) {
	orders, err := s.repo.ListStuck(ctx, cutoff, limit)
	if err != nil {
		return nil, fmt.Errorf("list stuck orders: %w", err)
	}
	return orders, nil
}

// Reconcile applies an outcome that reconciliation re-derived from the source of truth (stock's
// records) instead of receiving it as an event: the same transition, history and results as
// Follow, without an inbox claim. what names the outcome in logs ("stock.released").
func (s *Service) Reconcile(ctx context.Context, orderID, what string, apply Apply) (Result, error) {
	return s.follow(ctx, nil, orderID, what, apply)
}

// RepublishCreated writes order.created of a still-pending order to the outbox again, under a
// new event id (consumers' inboxes would swallow the first), for an order stock never saw.
// Stock locks per order id, so a copy of an order it did see changes nothing there. It
// returns false, emitting nothing, when the order is no longer pending or was re-published
// less than wait ago (order.Order.RepublishCreated).
func (s *Service) RepublishCreated(ctx context.Context, orderID string, wait time.Duration) (bool, error) {
	sent := false
	_, err := s.update(ctx, orderID, nil, func(o *order.Order) ([]events.Message, error) {
		if !o.RepublishCreated(s.now(), wait) {
			return nil, nil
		}
		msg, err := events.Encode(orderCreated(o), s.now())
		if err != nil {
			return nil, err
		}
		sent = true
		return []events.Message{msg}, nil
	})
	if err != nil {
		return false, fmt.Errorf("republish order.created of %s: %w", orderID, err)
	}
	return sent, nil
}
