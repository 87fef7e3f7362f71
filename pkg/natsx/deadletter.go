package natsx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockflow/stockflow/pkg/telemetry"
)

// This file reads DEADLETTER and replays what it holds (decision 0006). It reads only through
// ephemeral ordered consumers, the one way the permission table lets a service user read the
// stream (no direct or by-sequence gets), and it never deletes: DEADLETTER is the record of
// what failed, and a replay's outcome is the caller's to keep (pkg/deadletter's ledger).

// Kinds of dead letter.
const (
	// KindCopy is a copy Consume made of a poison or exhausted message: it carries the
	// original's body and headers, and can be replayed.
	KindCopy = "copy"
	// KindAdvisory is the server's max-deliveries advisory of a message whose last delivery
	// never finished (the handler hung, the process died). It names the original by stream and
	// sequence but carries no body, so it cannot be replayed from DEADLETTER.
	KindAdvisory = "advisory"
)

// HeaderReplayOf is set on a replayed message to the DEADLETTER sequence it came from.
const HeaderReplayOf = "Stockflow-Replay-Of"

// ErrDeadLetterNotFound is returned by GetDeadLetter for a sequence DEADLETTER does not hold
// (never written, or expired after the stream's 30 days).
var ErrDeadLetterNotFound = errors.New("no such dead letter")

// ErrNotReplayable is returned by Replay for a dead letter without the original message: a
// max-deliveries advisory, or one read without its body.
var ErrNotReplayable = errors.New("dead letter cannot be replayed")

// DeadLetter is one message of DEADLETTER as a reader sees it.
type DeadLetter struct {
	Seq  uint64    // its DEADLETTER sequence: the handle list, show and replay use
	Time time.Time // when it was dead-lettered
	Kind string    // KindCopy or KindAdvisory

	Subject    string // the original message's subject (order.created)
	Stream     string // the original's stream
	StreamSeq  uint64 // the original's sequence in Stream
	Consumer   string // the durable consumer that gave up on it
	Deliveries uint64 // how many times it was delivered
	Reason     string // "poison", "exhausted", or "max_deliveries" for an advisory
	Error      string // the handler's last error (copies only)

	// Header is the dead letter's headers: the original's (but the Nats-* ones) and HeaderDL*.
	Header nats.Header
	// Data is the original body (for an advisory, the advisory's JSON); empty when read
	// headers-only, as ListDeadLetters does.
	Data []byte

	headersOnly bool
}

// DeadLetterFilter selects the dead letters ListDeadLetters returns.
type DeadLetterFilter struct {
	// Consumers keeps the dead letters of these durable consumers; empty: every consumer's.
	Consumers []string
	// Subject keeps those of this original subject; empty: every subject.
	Subject string
}

func (f DeadLetterFilter) match(dl DeadLetter) bool {
	if f.Subject != "" && dl.Subject != f.Subject {
		return false
	}
	if len(f.Consumers) == 0 {
		return true
	}
	for _, c := range f.Consumers {
		if c == dl.Consumer {
			return true
		}
	}
	return false
}

// MaxDeadLetterScan bounds how many of the newest DEADLETTER messages ListDeadLetters reads.
const MaxDeadLetterScan = 10000

// DeadLetterList is what ListDeadLetters found.
type DeadLetterList struct {
	// DeadLetters match the filter, oldest first, headers only (Data is empty).
	DeadLetters []DeadLetter
	// Scanned is how many messages were read; Truncated says older ones were not, because the
	// stream holds more than MaxDeadLetterScan.
	Scanned   int
	Truncated bool
}

// ListDeadLetters reads the headers of the newest MaxDeadLetterScan messages of DEADLETTER and
// returns those f selects, oldest first. A missing DEADLETTER stream is an empty list.
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, f DeadLetterFilter) (DeadLetterList, error) {
	var out DeadLetterList
	state, err := deadLetterState(ctx, js)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("list dead letters: %w", err)
	}
	if state.Msgs == 0 {
		return out, nil
	}
	start := state.FirstSeq
	if state.LastSeq >= MaxDeadLetterScan && state.LastSeq-MaxDeadLetterScan+1 > start {
		start = state.LastSeq - MaxDeadLetterScan + 1
		out.Truncated = true
	}
	oc, err := orderedFrom(ctx, js, start, true)
	if err != nil {
		return out, fmt.Errorf("list dead letters: %w", err)
	}
	defer deleteOrdered(js, oc)
	for next := start; out.Scanned < MaxDeadLetterScan; {
		// Ask for no more than the stream holds up to LastSeq: a fetch then returns as soon as
		// they arrive, instead of waiting out FetchMaxWait for a full batch.
		want := int(min(256, uint64(MaxDeadLetterScan-out.Scanned), state.LastSeq-next+1))
		batch, err := oc.Fetch(want, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return out, fmt.Errorf("list dead letters: %w", err)
		}
		n, last := 0, uint64(0)
		for m := range batch.Messages() {
			n++
			dl := parseDeadLetter(m)
			last = dl.Seq
			if f.match(dl) {
				out.DeadLetters = append(out.DeadLetters, dl)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return out, fmt.Errorf("list dead letters: %w", err)
		}
		out.Scanned += n
		if n == 0 || last >= state.LastSeq {
			break
		}
		next = last + 1
	}
	return out, nil
}

// GetDeadLetter returns the DEADLETTER message seq with its body, or ErrDeadLetterNotFound.
func GetDeadLetter(ctx context.Context, js jetstream.JetStream, seq uint64) (DeadLetter, error) {
	state, err := deadLetterState(ctx, js)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return DeadLetter{}, fmt.Errorf("dead letter %d: %w", seq, ErrDeadLetterNotFound)
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead letter %d: %w", seq, err)
	}
	if seq == 0 || state.Msgs == 0 || seq < state.FirstSeq || seq > state.LastSeq {
		return DeadLetter{}, fmt.Errorf("dead letter %d: %w", seq, ErrDeadLetterNotFound)
	}
	oc, err := orderedFrom(ctx, js, seq, false)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead letter %d: %w", seq, err)
	}
	defer deleteOrdered(js, oc)
	m, err := oc.Next(jetstream.FetchMaxWait(2 * time.Second))
	if err != nil {
		if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			return DeadLetter{}, fmt.Errorf("dead letter %d: %w", seq, ErrDeadLetterNotFound)
		}
		return DeadLetter{}, fmt.Errorf("dead letter %d: %w", seq, err)
	}
	dl := parseDeadLetter(m)
	if dl.Seq != seq { // deleted: the consumer starts at the next one
		return DeadLetter{}, fmt.Errorf("dead letter %d: %w", seq, ErrDeadLetterNotFound)
	}
	return dl, nil
}

// Replay runs h on dl's original message as on a fresh delivery and returns h's error: the
// message has the original subject, body and headers (without the HeaderDL* ones, with
// HeaderReplayOf), and Metadata names the original stream, sequence and consumer. A handler
// built with On or Switch claims the envelope id in the inbox as the first delivery would, so
// a message whose effect is already applied — replayed before, or delivered again since —
// changes nothing. h must not acknowledge it: there is no delivery to acknowledge, and the
// dead letter stays in DEADLETTER whatever h returns. Replay returns ErrNotReplayable for an
// advisory or a dead letter read without its body.
//
// The replay runs in a consumer span continuing the original producer's trace.
func Replay(ctx context.Context, h Handler, dl DeadLetter) error {
	if dl.Kind != KindCopy || dl.headersOnly || dl.Subject == "" {
		return fmt.Errorf("replay dead letter %d: %w: the original is %s seq %d and DEADLETTER holds only the server's advisory of it",
			dl.Seq, ErrNotReplayable, dl.Stream, dl.StreamSeq)
	}
	msg := &replayMsg{dl: dl, header: nats.Header{}}
	for k, vs := range dl.Header {
		if strings.HasPrefix(k, "Stockflow-DL-") || strings.HasPrefix(k, "Nats-") {
			continue // the dead letter's own: Consume's HeaderDL*, and its Nats-Msg-Id "dl:…"
		}
		msg.header[k] = vs
	}
	msg.header.Set(HeaderReplayOf, strconv.FormatUint(dl.Seq, 10))

	ctx = telemetry.ExtractNATS(ctx, msg.header)
	ctx, span := otel.Tracer(instrumentation).Start(ctx, "replay "+dl.Subject,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", dl.Subject),
			attribute.String("messaging.consumer.group.name", dl.Consumer),
			attribute.Int64("messaging.nats.stream_sequence", int64(dl.StreamSeq)),
			attribute.Int64("stockflow.deadletter.sequence", int64(dl.Seq)),
		))
	defer span.End()
	if err := h(ctx, msg); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	return nil
}

// errReplayAck is what acknowledging a replayed message returns: a Handler never should.
var errReplayAck = errors.New("a replayed dead letter is not a delivery and is not acknowledged")

// replayMsg is a dead letter's original message as Replay hands it to a Handler.
type replayMsg struct {
	dl     DeadLetter
	header nats.Header
}

var _ jetstream.Msg = (*replayMsg)(nil)

func (m *replayMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Stream: m.dl.StreamSeq},
		NumDelivered: m.dl.Deliveries + 1,
		Stream:       m.dl.Stream,
		Consumer:     m.dl.Consumer,
		Timestamp:    m.dl.Time,
	}, nil
}
func (m *replayMsg) Data() []byte                     { return m.dl.Data }
func (m *replayMsg) Headers() nats.Header             { return m.header }
func (m *replayMsg) Subject() string                  { return m.dl.Subject }
func (m *replayMsg) Reply() string                    { return "" }
func (m *replayMsg) Ack() error                       { return errReplayAck }
func (m *replayMsg) DoubleAck(context.Context) error  { return errReplayAck }
func (m *replayMsg) Nak() error                       { return errReplayAck }
func (m *replayMsg) NakWithDelay(time.Duration) error { return errReplayAck }
func (m *replayMsg) InProgress() error                { return errReplayAck }
func (m *replayMsg) Term() error                      { return errReplayAck }
func (m *replayMsg) TermWithReason(string) error      { return errReplayAck }
func (m *replayMsg) String() string {
	return "replay of dead letter " + strconv.FormatUint(m.dl.Seq, 10)
}

func deadLetterState(ctx context.Context, js jetstream.JetStream) (jetstream.StreamState, error) {
	s, err := js.Stream(ctx, StreamDeadLetter)
	if err != nil {
		return jetstream.StreamState{}, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return jetstream.StreamState{}, err
	}
	return info.State, nil
}

// orderedFrom is an ordered consumer of all of DEADLETTER from seq on. It has no subject
// filter: the permission table lets a service create DEADLETTER consumers by name only
// ($JS.API.CONSUMER.CREATE.DEADLETTER.*), not with a filter subject in the API subject.
func orderedFrom(ctx context.Context, js jetstream.JetStream, seq uint64, headersOnly bool) (jetstream.Consumer, error) {
	return js.OrderedConsumer(ctx, StreamDeadLetter, jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       seq,
		HeadersOnly:       headersOnly,
		InactiveThreshold: 30 * time.Second,
	})
}

// deleteOrdered removes oc's server-side consumer now rather than after its inactive threshold.
// Failing is harmless (the server removes it then), so the error is dropped on purpose.
func deleteOrdered(js jetstream.JetStream, oc jetstream.Consumer) {
	info := oc.CachedInfo()
	if info == nil || info.Name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, StreamDeadLetter, info.Name)
}

// advisoryBody is the part of a max-deliveries advisory DeadLetter reads.
type advisoryBody struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// parseDeadLetter reads a DEADLETTER message: a Consume copy by its HeaderDL* headers, an
// advisory by its subject ($JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>) and,
// when read with its body, the stream sequence and deliveries the body names.
func parseDeadLetter(m jetstream.Msg) DeadLetter {
	dl := DeadLetter{Kind: KindCopy, Header: m.Headers(), Data: m.Data()}
	if md, err := m.Metadata(); err == nil {
		dl.Seq, dl.Time = md.Sequence.Stream, md.Timestamp
	}
	dl.headersOnly = len(dl.Data) == 0 && dl.Header.Get("Nats-Msg-Size") != ""
	if rest, ok := strings.CutPrefix(m.Subject(), strings.TrimSuffix(SubjectsMaxDeliveries, ">")); ok {
		dl.Kind, dl.Reason = KindAdvisory, "max_deliveries"
		dl.Stream, dl.Consumer, _ = strings.Cut(rest, ".")
		var a advisoryBody
		if len(dl.Data) > 0 && json.Unmarshal(dl.Data, &a) == nil {
			dl.StreamSeq, dl.Deliveries = a.StreamSeq, a.Deliveries
		}
		return dl
	}
	h := dl.Header
	dl.Subject = h.Get(HeaderDLSubject)
	if dl.Subject == "" {
		dl.Subject = strings.TrimPrefix(m.Subject(), SubjectDeadLetterPrefix)
	}
	dl.Stream = h.Get(HeaderDLStream)
	dl.StreamSeq, _ = strconv.ParseUint(h.Get(HeaderDLStreamSeq), 10, 64)
	dl.Consumer = h.Get(HeaderDLConsumer)
	dl.Deliveries, _ = strconv.ParseUint(h.Get(HeaderDLDeliveries), 10, 64)
	dl.Reason = h.Get(HeaderDLReason)
	dl.Error = h.Get(HeaderDLError)
	return dl
}
