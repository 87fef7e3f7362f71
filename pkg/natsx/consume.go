package natsx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/telemetry"
)

const instrumentation = "github.com/stockflow/stockflow/pkg/natsx"

// Handler processes one message. It returns nil when the message is done — processed now, or
// found already processed (an inbox hit) — Permanent(err) or an error wrapping
// events.ErrMalformed when the message can never succeed, and any other error when a retry may
// succeed. A Handler must not ack the message itself; Consume does, exactly once.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as poison: Consume dead-letters and terminates the message instead of
// retrying it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// IsPermanent reports whether err was marked Permanent or wraps events.ErrMalformed.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) || errors.Is(err, events.ErrMalformed)
}

type unavailableError struct{ err error }

func (e unavailableError) Error() string { return e.err.Error() }
func (e unavailableError) Unwrap() error { return e.err }

// Unavailable marks err as an outage of something the handler needs (its database refused or
// dropped the connection), not a fault of the message: Consume keeps retrying it past
// MaxDeliver, up to OutageMaxDeliver deliveries, so that a database restart or failover of
// hours dead-letters nothing. Unavailable(nil) is nil; Permanent wins over it.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return unavailableError{err: err}
}

// IsUnavailable reports whether err was marked Unavailable.
func IsUnavailable(err error) bool {
	var u unavailableError
	return errors.As(err, &u)
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e retryAfterError) Error() string { return e.err.Error() }
func (e retryAfterError) Unwrap() error { return e.err }

// RetryAfter marks err as transient with a known wait: the message cannot succeed before after
// has passed (an event that came early), so Consume naks it with that delay instead of
// RetryDelay's. It counts against MaxDeliver like any retry. RetryAfter(nil, d) is nil; a d
// that is not positive leaves the delay to RetryDelay; Permanent wins over it.
func RetryAfter(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return retryAfterError{err: err, after: after}
}

// retryDelay is how long the message whose handler failed with err on its numDelivered-th
// delivery waits before the next one: RetryAfter's delay when err carries one, else
// RetryDelay's.
func retryDelay(err error, numDelivered uint64) time.Duration {
	var r retryAfterError
	if errors.As(err, &r) && r.after > 0 {
		return r.after
	}
	return RetryDelay(numDelivered)
}

// retryDelays is the NakWithDelay schedule by delivery count: quick retries for blips (a lock
// timeout, a deadlock victim), then slower ones for outages, capped so a recovered dependency
// is noticed within seconds.
var retryDelays = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 5 * time.Second, 10 * time.Second}

// RetryDelay is how long a message that failed transiently on its numDelivered-th delivery
// waits before the next one: 100ms, 500ms, 2s, 5s, then 10s.
func RetryDelay(numDelivered uint64) time.Duration {
	if numDelivered < 1 {
		numDelivered = 1
	}
	if numDelivered > uint64(len(retryDelays)) {
		return retryDelays[len(retryDelays)-1]
	}
	return retryDelays[numDelivered-1]
}

// Consumer defaults, applied by Consume to the zero fields of a ConsumerSpec.
const (
	// DefaultMaxDeliver: with RetryDelay this is about 2.5 minutes of retries of a failing
	// handler, short enough that a stuck message surfaces in DEADLETTER.
	DefaultMaxDeliver = 20
	// DefaultOutageMaxDeliver is how often a message whose handler fails Unavailable is
	// delivered: 10 s apart, about 2.8 hours of a database outage. It is the consumer's
	// MaxDeliver on the server, so it also bounds a message that kills its process each time
	// (no handler sees that end: the server's advisory dead-letters it).
	DefaultOutageMaxDeliver = 1000
	// DefaultAckWait bounds one handler run (a transaction or two); a delivery not acked by
	// then — the process died or hung — is redelivered.
	DefaultAckWait = 30 * time.Second
	// DefaultMaxAckPending caps unacknowledged messages per consumer: those its Workers are
	// handling, the prefetch buffer behind them, and messages waiting out a NakWithDelay.
	// Consumers with many workers raise it (a few times Workers).
	DefaultMaxAckPending = 256
)

// ConsumerSpec describes a durable pull consumer. Zero MaxDeliver, AckWait and MaxAckPending
// take the Default* values. Stream and Durable are required; empty FilterSubjects means every
// subject of the stream.
type ConsumerSpec struct {
	Stream         string
	Durable        string
	FilterSubjects []string
	MaxDeliver     int
	// OutageMaxDeliver is the delivery budget of a message failing Unavailable (default
	// DefaultOutageMaxDeliver, never below MaxDeliver).
	OutageMaxDeliver int
	AckWait          time.Duration
	MaxAckPending    int
	// Workers is how many handlers run at once (default 1: in stream order, but for the
	// retries). More workers trade that order for throughput; handlers must then tolerate
	// events of one entity arriving out of order, as stockflow's do (row locks serialise them,
	// the domain decides). pkg/service gives every consumer that sets none Base.ConsumerWorkers.
	Workers int
	// PriorityGroup, when set, pins the consumer to one client at a time (JetStream's
	// pinned_client priority policy): of the replicas that run it, one gets its messages
	// until it stops pulling for PinnedTTL, then another is pinned. Correctness never rests on
	// it (inboxes and row locks do); it keeps one partition's work on one replica.
	PriorityGroup string
}

// PinnedTTL is how long a pinned consumer waits for its pinned client's next pull before it
// pins another: a crashed replica's partitions move within it. Consume pulls at least every
// pullExpiry, well inside it.
const PinnedTTL = 15 * time.Second

// Combined is s for a handler whose use case is combined (pkg/combine) into batches of up to
// maxBatch: twice that many handlers, waiting in the batcher without holding a database
// connection, so that while one batch commits the other half gather the next; and four times
// the handlers unacknowledged.
func (s ConsumerSpec) Combined(maxBatch int) ConsumerSpec {
	s.Workers = 2 * maxBatch
	s.MaxAckPending = 4 * s.Workers
	return s
}

func (s ConsumerSpec) withDefaults() ConsumerSpec {
	if s.MaxDeliver == 0 {
		s.MaxDeliver = DefaultMaxDeliver
	}
	if s.OutageMaxDeliver == 0 {
		s.OutageMaxDeliver = DefaultOutageMaxDeliver
	}
	s.OutageMaxDeliver = max(s.OutageMaxDeliver, s.MaxDeliver)
	if s.AckWait == 0 {
		s.AckWait = DefaultAckWait
	}
	if s.MaxAckPending == 0 {
		s.MaxAckPending = DefaultMaxAckPending
	}
	if s.Workers < 1 {
		s.Workers = 1
	}
	return s
}

func (s ConsumerSpec) config() jetstream.ConsumerConfig {
	priorityPolicy, pinnedTTL, groups := jetstream.PriorityPolicyNone, time.Duration(0), []string(nil)
	if s.PriorityGroup != "" {
		priorityPolicy, pinnedTTL, groups = jetstream.PriorityPolicyPinned, PinnedTTL, []string{s.PriorityGroup}
	}
	return jetstream.ConsumerConfig{
		Durable:        s.Durable,
		Description:    "stockflow consumer " + s.Durable,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        s.AckWait,
		MaxDeliver:     s.OutageMaxDeliver,
		MaxAckPending:  s.MaxAckPending,
		FilterSubjects: s.FilterSubjects,
		PriorityPolicy: priorityPolicy,
		PinnedTTL:      pinnedTTL,
		PriorityGroups: groups,
		// No BackOff: failed deliveries are spaced by NakWithDelay (RetryDelay); AckWait alone
		// governs redelivery after a crash.
	}
}

// Dead-letter headers added to the copy published on deadletter.<original subject>. The
// original's own headers are kept, except the Nats-* ones the server interprets.
const (
	HeaderDLSubject    = "Stockflow-DL-Subject"
	HeaderDLStream     = "Stockflow-DL-Stream"
	HeaderDLStreamSeq  = "Stockflow-DL-Stream-Seq"
	HeaderDLConsumer   = "Stockflow-DL-Consumer"
	HeaderDLDeliveries = "Stockflow-DL-Deliveries"
	HeaderDLError      = "Stockflow-DL-Error"
	HeaderDLReason     = "Stockflow-DL-Reason" // "poison" or "exhausted"
)

// Consume creates or updates the durable pull consumer spec (explicit ack, deliver all) and
// runs h on its messages, spec.Workers at a time (default one), until ctx is done or stop is
// called. For each message it continues the producer's trace from the message headers in a consumer span, calls h and
// acknowledges as the package documentation describes; a failed Ack, Nak, Term or dead-letter
// publish is logged with the message's stream sequence and never silently dropped (JetStream
// then redelivers after AckWait).
//
// Dead letters: a message terminated as poison, or failing on its MaxDeliver-th delivery (its
// OutageMaxDeliver-th when the failure is Unavailable), is
// first republished to deadletter.<subject> (stream DEADLETTER) with the HeaderDL* headers
// and Nats-Msg-Id "dl:<stream>:<consumer>:<seq>", and only then terminated; if that publish fails the
// message is Nak'ed instead, so it is never lost. Each is counted in the OpenTelemetry counter
// stockflow.messaging.terminated (labels consumer, reason), every delivery after a message's
// first in stockflow.messaging.redeliveries, and the consumer's num_pending is the gauge
// stockflow.messaging.consumer.lag while it runs (consume_metrics.go). Deliveries the handler never finished (hang or crash on
// the last delivery) reach DEADLETTER through the server's max-deliveries advisory.
//
// stop stops fetching, waits for the running handlers (up to spec.Workers) to finish (a
// graceful drain: messages prefetched but not started are Nak'ed back to the server for
// another replica) and is safe to call more than once. Call it before cancelling the context
// the handlers use.
func Consume(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec, h Handler, log *slog.Logger) (stop func(), err error) {
	if spec.Stream == "" || spec.Durable == "" {
		return nil, errors.New("consume: stream and durable are required")
	}
	if h == nil {
		return nil, errors.New("consume: nil handler")
	}
	if log == nil {
		log = slog.Default()
	}
	spec = spec.withDefaults()
	log = log.With("stream", spec.Stream, "consumer", spec.Durable)

	cons, err := js.CreateOrUpdateConsumer(ctx, spec.Stream, spec.config())
	if err != nil {
		return nil, fmt.Errorf("consume %s/%s: create consumer: %w", spec.Stream, spec.Durable, err)
	}
	if spec.PriorityGroup != "" {
		// The server drops a pin only after PinnedTTL without pulls, not when its client
		// disconnects: a replica that crashed and restarts would wait that long for its own
		// partitions. A starting replica unpins; a live one loses its pin once, which costs a
		// move of the partition and nothing else.
		unpin(js, spec, "start", log)
	}
	metrics, err := newConsumerMetrics(spec, cons)
	if err != nil {
		return nil, fmt.Errorf("consume %s/%s: %w", spec.Stream, spec.Durable, err)
	}
	c := &consumer{
		js:      js,
		spec:    spec,
		h:       h,
		log:     log,
		ctx:     ctx,
		tracer:  otel.Tracer(instrumentation),
		metrics: metrics,
	}
	// The client buffers at most two messages per worker: a worker that finishes finds the
	// next one here while the refill is pulled, and a queued message waits about two
	// handler runs, not the 64/Workers it could wait before — long enough, under slow
	// handlers, to outlive AckWait and be redelivered while still queued (review F18).
	prefetch := min(spec.MaxAckPending, 2*spec.Workers, 64)
	pull := []jetstream.PullConsumeOpt{
		jetstream.PullMaxMessages(prefetch),
		// Pulls of 5 s (heartbeats every 2.5 s) instead of 30 s: when the node serving the
		// consumer dies, the client notices and pulls from its new leader within seconds.
		jetstream.PullExpiry(pullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			log.Warn("consume error", "err", err)
		}),
	}
	if spec.PriorityGroup != "" {
		pull = append(pull, jetstream.PullPriorityGroup(spec.PriorityGroup))
	}
	// The client calls back from one goroutine; workers take deliveries from it. The send
	// blocks while every worker is busy, which holds back the prefetch: backpressure.
	deliveries := make(chan jetstream.Msg)
	var workers sync.WaitGroup
	for range spec.Workers {
		workers.Go(func() {
			for m := range deliveries {
				c.handle(m)
			}
		})
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { deliveries <- m }, pull...)
	if err != nil {
		close(deliveries)
		metrics.close()
		return nil, fmt.Errorf("consume %s/%s: start: %w", spec.Stream, spec.Durable, err)
	}

	var once sync.Once
	stopped := make(chan struct{})
	stop = func() {
		once.Do(func() {
			close(stopped)
			cc.Drain()
			c.gate.close() // waits for the running handlers; later deliveries are handed back
			select {
			case <-cc.Closed():
				close(deliveries) // no callback can run any more
				workers.Wait()
			case <-time.After(5 * time.Second):
				log.Warn("consumer did not close within 5s after drain")
			}
			metrics.close()
			if spec.PriorityGroup != "" {
				unpin(js, spec, "stop", log)
			}
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-stopped:
		}
	}()
	return stop, nil
}

// unpin releases a pinned consumer's pin now rather than after PinnedTTL: on stop, so that a
// rolling restart pauses no partition; on start, for a pin a crashed replica still holds. Were
// this replica not the pinned one, the pinned one loses its pin for one pull, which costs
// nothing but that pull.
func unpin(js jetstream.JetStream, spec ConsumerSpec, on string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, spec.Stream)
	if err == nil {
		err = s.UnpinConsumer(ctx, spec.Durable, spec.PriorityGroup)
	}
	if err != nil {
		log.Warn("unpin on "+on+" failed; the pin moves after the pinned TTL", "err", err, "pinned_ttl", PinnedTTL)
	}
}

// gate lets handlers in until it is closed, and close waits for those inside.
type gate struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

func (g *gate) leave() { g.wg.Done() }

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

type consumer struct {
	js      jetstream.JetStream
	spec    ConsumerSpec
	h       Handler
	log     *slog.Logger
	ctx     context.Context
	tracer  trace.Tracer
	metrics *consumerMetrics
	gate    gate
}

// pullExpiry is how long one pull request waits on the server.
const pullExpiry = 5 * time.Second

// ackTimeout bounds the wait for the server to confirm an Ack.
const ackTimeout = 5 * time.Second

func (c *consumer) handle(msg jetstream.Msg) {
	start := time.Now()
	log := c.log.With("subject", msg.Subject(), "event_id", eventID(msg))
	md, mdErr := msg.Metadata()
	var numDelivered, seq uint64 = 1, 0
	if mdErr == nil {
		numDelivered, seq = md.NumDelivered, md.Sequence.Stream
		log = log.With("stream_seq", seq, "delivery", numDelivered)
	} else {
		log.WarnContext(c.ctx, "message without jetstream metadata", "err", mdErr)
	}

	if !c.gate.enter() {
		// Stopping: hand the message back at once instead of letting it wait out AckWait.
		if err := msg.Nak(); err != nil {
			log.ErrorContext(c.ctx, "nak on stop failed", "err", err)
		}
		return
	}
	defer c.gate.leave()
	c.metrics.delivered(c.ctx, numDelivered)

	ctx := telemetry.ExtractNATS(c.ctx, msg.Headers())
	template := events.SubjectTemplate(msg.Subject())
	ctx, span := c.tracer.Start(ctx, "process "+template,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", msg.Subject()),
			attribute.String("messaging.destination.template", template),
			attribute.String("messaging.consumer.group.name", c.spec.Durable),
			attribute.String("messaging.message.id", msg.Headers().Get(jetstream.MsgIDHeader)),
			attribute.Int64("messaging.nats.stream_sequence", int64(seq)),
			attribute.Int64("messaging.nats.delivery_count", int64(numDelivered)),
		))
	defer span.End()

	// A handler gets AckWait: past it the message is redelivered anyway, and a handler stuck
	// on a connection that will never answer must give its worker back.
	hctx, cancelHandler := context.WithTimeout(ctx, c.spec.AckWait)
	herr := c.h(hctx, msg)
	cancelHandler()
	outcome := "ack"
	switch {
	case herr == nil:
		ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		defer cancel()
		if err := msg.DoubleAck(ackCtx); err != nil {
			span.RecordError(err)
			log.ErrorContext(ctx, "ack failed; the message will be redelivered", "err", err)
		}
	case IsPermanent(herr):
		outcome = c.deadLetter(ctx, span, log, msg, seq, numDelivered, "poison", herr)
	case numDelivered >= uint64(c.spec.OutageMaxDeliver),
		numDelivered >= uint64(c.spec.MaxDeliver) && !IsUnavailable(herr):
		outcome = c.deadLetter(ctx, span, log, msg, seq, numDelivered, "exhausted", herr)
	default:
		outcome = "nak"
		span.RecordError(herr)
		span.SetStatus(codes.Error, herr.Error())
		delay := retryDelay(herr, numDelivered)
		log.WarnContext(ctx, "handler failed; retrying", "err", herr, "retry_in", delay)
		if err := msg.NakWithDelay(delay); err != nil {
			log.ErrorContext(ctx, "nak failed; the message will be redelivered after ack wait", "err", err, "handler_err", herr)
		}
	}
	log.DebugContext(ctx, "message handled", "outcome", outcome, "duration_ms", float64(time.Since(start).Microseconds())/1000)
}

// eventID names msg in logs: the id of its envelope when the body is one, its Nats-Msg-Id
// otherwise (a malformed body, a message that is not a pkg/events envelope).
func eventID(msg jetstream.Msg) string {
	var env struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(msg.Data(), &env) == nil && env.ID != "" {
		return env.ID
	}
	return msg.Headers().Get(jetstream.MsgIDHeader)
}

// deadLetter copies msg to DEADLETTER and terminates it; when the copy cannot be stored the
// message is Nak'ed so that it is retried rather than lost. It returns what it did: "term" or
// "nak".
func (c *consumer) deadLetter(ctx context.Context, span trace.Span, log *slog.Logger, msg jetstream.Msg, seq, numDelivered uint64, reason string, herr error) (outcome string) {
	span.RecordError(herr)
	span.SetStatus(codes.Error, reason+": "+herr.Error())
	dl := nats.NewMsg(SubjectDeadLetterPrefix + msg.Subject())
	for k, vs := range msg.Headers() {
		if strings.HasPrefix(k, "Nats-") {
			continue // Nats-Msg-Id, Nats-Schedule*, Nats-Expected-*… mean something to the server
		}
		dl.Header[k] = vs
	}
	dl.Header.Set(HeaderDLSubject, msg.Subject())
	dl.Header.Set(HeaderDLStream, c.spec.Stream)
	dl.Header.Set(HeaderDLStreamSeq, strconv.FormatUint(seq, 10))
	dl.Header.Set(HeaderDLConsumer, c.spec.Durable)
	dl.Header.Set(HeaderDLDeliveries, strconv.FormatUint(numDelivered, 10))
	dl.Header.Set(HeaderDLError, herr.Error())
	dl.Header.Set(HeaderDLReason, reason)
	dl.Data = msg.Data()

	pubCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	// Per consumer: two consumers giving up on one message are two dead letters, not one
	// that JetStream's duplicate window would keep while dropping the other.
	msgID := fmt.Sprintf("dl:%s:%s:%d", c.spec.Stream, c.spec.Durable, seq)
	if _, err := c.js.PublishMsg(pubCtx, dl, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(StreamDeadLetter)); err != nil {
		log.ErrorContext(ctx, "dead-letter publish failed; retrying the message instead of terminating it", "err", err, "handler_err", herr)
		if err := msg.NakWithDelay(RetryDelay(numDelivered)); err != nil {
			log.ErrorContext(ctx, "nak failed; the message will be redelivered after ack wait", "err", err)
		}
		return "nak"
	}
	c.metrics.deadLettered(ctx, c.spec.Durable, reason)
	log.ErrorContext(ctx, "message dead-lettered and terminated", "reason", reason, "err", herr)
	if err := msg.TermWithReason(reason + ": " + truncate(herr.Error(), 200)); err != nil {
		log.ErrorContext(ctx, "term failed; the message will be redelivered and dead-lettered again (deduplicated)", "err", err)
	}
	return "term"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
