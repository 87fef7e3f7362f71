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
	verdictIgnored   = "ignored"   // authentic, of a kind the adapter does not act on
	verdictRefund    = "refund"    // a refund confirmation, applied
	// verdictRefundUnmatched: a refund confirmation for no refund we requested (for a human).
	verdictRefundUnmatched = "refund_unmatched"
)

var verdicts = []string{verdictAccepted, verdictDuplicate, verdictForged, verdictMalformed, verdictMismatch,
	verdictIgnored, verdictRefund, verdictRefundUnmatched}

// The outcomes of stockflow.payment.refunds.
const (
	refundRequested = "requested" // recorded; the provider is to be asked
	refundSucceeded = "succeeded" // the money is back: the payment is refunded
	refundPending   = "pending"   // the provider accepted it; its confirmation is awaited
	refundFailed    = "failed"    // the provider will not pay it back: for a human
	refundRetry     = "retry"     // a provider call failed transiently; it is retried
)

var refundOutcomes = []string{refundRequested, refundSucceeded, refundPending, refundFailed, refundRetry}

// recorder holds payment-adapter's instruments (docs/observability.md), made once per Service.
type recorder struct {
	callbacks   metric.Int64Counter
	attrs       map[string]map[string][]metric.AddOption // provider → verdict → options
	refunds     metric.Int64Counter
	refundAttrs map[string]map[string][]metric.AddOption // provider → outcome → options
}

// newRecorder makes the instruments on mp for the given providers. A refused instrument (it
// never should be: the name is valid) is reported to otel's error handler.
func newRecorder(mp metric.MeterProvider, providers []string) *recorder {
	r := &recorder{}
	var err error
	meter := mp.Meter(instrumentation)
	r.callbacks, err = meter.Int64Counter("stockflow.payment.callbacks",
		metric.WithDescription("Provider callbacks by provider and verdict: accepted, duplicate, forged, malformed, mismatch, ignored, refund, refund_unmatched."),
		metric.WithUnit("{callback}"))
	if err != nil {
		otel.Handle(err)
	}
	r.refunds, err = meter.Int64Counter("stockflow.payment.refunds",
		metric.WithDescription("Refund steps by provider and outcome: requested, succeeded, pending, failed, retry."),
		metric.WithUnit("{refund}"))
	if err != nil {
		otel.Handle(err)
	}
	r.attrs = options(providers, "verdict", verdicts)
	r.refundAttrs = options(providers, "outcome", refundOutcomes)
	return r
}

// options are the attribute sets of each provider and value of key, made once.
func options(providers []string, key string, values []string) map[string]map[string][]metric.AddOption {
	out := map[string]map[string][]metric.AddOption{}
	for _, p := range providers {
		out[p] = map[string][]metric.AddOption{}
		for _, v := range values {
			out[p][v] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
				attribute.String("provider", p), attribute.String(key, v)))}
		}
	}
	return out
}

// refund counts a refund step of provider.
func (r *recorder) refund(ctx context.Context, provider, outcome string) {
	if opts, ok := r.refundAttrs[provider][outcome]; ok {
		r.refunds.Add(ctx, 1, opts...)
	}
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
