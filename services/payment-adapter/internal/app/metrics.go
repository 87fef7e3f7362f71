package app

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// instrumentation is the meter name of payment-adapter's instruments.
const instrumentation = "github.com/stockflow/stockflow/services/payment-adapter"

// WithMeterProvider makes the service's instruments on mp instead of the global
// MeterProvider (tests read them through a manual reader).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(s *Service) { s.meters = mp } }

// The verdicts of stockflow.payment.callbacks.
const (
	verdictAccepted  = "accepted"  // a new notification, recorded (succeeded or declined)
	verdictDuplicate = "duplicate" // its provider transaction was recorded before
	verdictForged    = "forged"    // the signature does not prove it comes from the provider
	verdictMalformed = "malformed" // authentic but not understood
	verdictMismatch  = "mismatch"  // recorded, but its amount or currency is not the order's
)

// recorder holds payment-adapter's instruments (docs/observability.md), made once per Service.
type recorder struct {
	callbacks metric.Int64Counter
	attrs     map[string]map[string][]metric.AddOption // provider → verdict → options
}

// newRecorder makes the instruments on mp for the given providers. A refused instrument (it
// never should be: the name is valid) is reported to otel's error handler.
func newRecorder(mp metric.MeterProvider, providers []string) *recorder {
	r := &recorder{attrs: map[string]map[string][]metric.AddOption{}}
	var err error
	r.callbacks, err = mp.Meter(instrumentation).Int64Counter("stockflow.payment.callbacks",
		metric.WithDescription("Provider callbacks by provider and verdict: accepted, duplicate, forged, malformed, mismatch."),
		metric.WithUnit("{callback}"))
	if err != nil {
		otel.Handle(err)
	}
	for _, p := range providers {
		r.attrs[p] = map[string][]metric.AddOption{}
		for _, v := range []string{verdictAccepted, verdictDuplicate, verdictForged, verdictMalformed, verdictMismatch} {
			r.attrs[p][v] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
				attribute.String("provider", p), attribute.String("verdict", v)))}
		}
	}
	return r
}

func (r *recorder) count(ctx context.Context, provider, verdict string) {
	if opts, ok := r.attrs[provider][verdict]; ok { // a provider not registered mints no series
		r.callbacks.Add(ctx, 1, opts...)
	}
}

// refused counts a callback of provider that err refused: forged or malformed. Other errors
// (the order not known yet, the database) are no verdict: the provider retries.
func (r *recorder) refused(ctx context.Context, provider string, err error) {
	switch {
	case errors.Is(err, payment.ErrInvalidSignature):
		r.count(ctx, provider, verdictForged)
	case errors.Is(err, payment.ErrMalformedNotification):
		r.count(ctx, provider, verdictMalformed)
	}
}

// recorded counts a callback of provider that RecordPayment answered with p.
func (r *recorder) recorded(ctx context.Context, provider string, created bool, p *payment.Payment) {
	switch {
	case !created:
		r.count(ctx, provider, verdictDuplicate)
	case p.CapturedMismatch():
		r.count(ctx, provider, verdictMismatch)
	default:
		r.count(ctx, provider, verdictAccepted)
	}
}
