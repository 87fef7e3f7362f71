// Package events is stockflow's wire contract: every subject and payload that crosses a service
// boundary, one file per event. Start reading here: it lists every message in the system.
//
// Every message body is an Envelope whose Data holds the event. SchemaVersion is the major
// version of the contract; within a version, changes are additive only (new optional fields,
// new events), so services built from different releases of this package work together in
// either order. ContractVersion names the release; testdata/v<release>/ holds, for every
// event, the body that release writes, and the tests hold today's code to every folder.
package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
)

// SchemaVersion is the contract version this build writes and the highest it reads.
const SchemaVersion = 1

// ContractVersion is the release of the contract this build writes, "<major>.<minor>": the
// major is SchemaVersion, the minor counts additive changes within it.
//
// The rule, held by the tests in contract_test.go:
//   - A change that adds a field or an event bumps the minor and adds testdata/v<new>/ with
//     one fixture per event exactly as this build writes it; an existing folder is never
//     edited, it is what services of that release write and read in production.
//   - Every folder's fixtures must decode with today's code and keep every field they carry
//     (a consumer released after the producer), and today's encoding of every event must
//     still carry every field of every folder with the same JSON type (a consumer released
//     before the producer, which reads by the older rules).
//   - Renaming, removing or retyping a field, or making an optional field required, is a new
//     major: SchemaVersion 2, published beside version 1 (or on a new subject) until no
//     consumer of version 1 runs; only then are the v1.* folders removed.
const ContractVersion = "1.2"

// Event is implemented by every payload type in this package.
type Event interface {
	// Subject is the event's type (the envelope's type) and the NATS subject it is published
	// on; a Keyed event's subject carries its key after it.
	Subject() string
}

// Keyed is implemented by an event whose subject carries a key token after its type,
// <type>.<key> (order.created.SKU-1): the stream maps the key to a partition, and a consumer
// per partition keeps one key's events on one replica (natsx.StreamConfigs). A consumer of
// every key filters <type>.> and, for messages of producers older than the key, <type>.
type Keyed interface {
	Event
	Key() string
}

// SubjectOf is the subject ev is published on: its Subject, followed by its Key when it is
// Keyed.
func SubjectOf(ev Event) string {
	if k, ok := ev.(Keyed); ok {
		return ev.Subject() + "." + k.Key()
	}
	return ev.Subject()
}

// SubjectTemplate is subject with a Keyed event's key (and whatever the stream put before it,
// a partition) named instead of spelled out: order.created.SKU-1 and order.created.3.SKU-1
// are order.created.{key}. Span names use it, as OpenTelemetry's messaging conventions ask
// for a destination of low cardinality; every other subject is its own template.
func SubjectTemplate(subject string) string {
	for _, t := range keyedTypes {
		if strings.HasPrefix(subject, t+".") {
			return t + ".{key}"
		}
	}
	return subject
}

// keyedTypes are the Subjects of the Keyed events.
var keyedTypes = []string{SubjectOrderCreated}

// SubjectKey turns a SKU into a subject token: a SKU may contain '.', a token may not. A string
// that is no SKU (ValidSKU) becomes "invalid", so that its event still reaches a consumer that
// answers it.
func SubjectKey(sku string) string {
	if !ValidSKU(sku) {
		return "invalid"
	}
	return strings.ReplaceAll(sku, ".", "_")
}

// Envelope is the body of every message.
type Envelope struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schema_version"`
	OccurredAt    time.Time       `json:"occurred_at"`
	Data          json.RawMessage `json:"data"`
}

// Message is an encoded event ready for the outbox: ID doubles as the Nats-Msg-Id. Headers
// are extra NATS headers (a schedule's Nats-Schedule, say); trace context is added by the outbox.
type Message struct {
	ID      string
	Subject string
	Data    []byte
	Headers map[string]string
}

// ErrMalformed marks a message that can never be processed (bad JSON, unknown version or
// type, missing fields); consumers terminate it instead of retrying.
var ErrMalformed = errors.New("malformed event")

// NewID returns a new event id (UUIDv7: time-ordered).
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// Encode wraps ev in an envelope with a fresh id.
func Encode(ev Event, at time.Time) (Message, error) {
	return EncodeWithID(NewID(), ev, at)
}

// EncodeWithID wraps ev with a caller-chosen id: a deterministic id (say "timeout:<order>")
// lets JetStream deduplication absorb a second publish of the same fact.
func EncodeWithID(id string, ev Event, at time.Time) (Message, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return Message{}, fmt.Errorf("encode %s: %w", ev.Subject(), err)
	}
	body, err := json.Marshal(Envelope{ID: id, Type: ev.Subject(), SchemaVersion: SchemaVersion, OccurredAt: at.UTC(), Data: data})
	if err != nil {
		return Message{}, fmt.Errorf("encode %s: %w", ev.Subject(), err)
	}
	return Message{ID: id, Subject: SubjectOf(ev), Data: body}, nil
}

// Open decodes the envelope of a message body.
func Open(body []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Envelope{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if env.ID == "" || env.Type == "" {
		return Envelope{}, fmt.Errorf("%w: envelope without id or type", ErrMalformed)
	}
	if env.SchemaVersion < 1 || env.SchemaVersion > SchemaVersion {
		return Envelope{}, fmt.Errorf("%w: schema version %d not supported (max %d)", ErrMalformed, env.SchemaVersion, SchemaVersion)
	}
	// Envelopes carry occurred_at in UTC; an offset that moves it out of years 0-9999 there
	// would make an envelope no one can write again (found by FuzzDecode).
	if y := env.OccurredAt.UTC().Year(); y < 0 || y > 9999 {
		return Envelope{}, fmt.Errorf("%w: occurred_at %s is outside years 0-9999 in UTC", ErrMalformed, env.OccurredAt.Format(time.RFC3339))
	}
	return env, nil
}

// Payload is implemented by every payload type of this package that Decode reads: an Event
// that can check itself. Generic code elsewhere (natsx.On) names it to call Decode[T].
type Payload interface {
	Event
	validate() error
}

// Decode opens body and decodes its data as T, checking that the type matches T's subject and
// that the payload is valid. Unknown fields are accepted: newer producers may add them.
func Decode[T Payload](body []byte) (Envelope, T, error) {
	var ev T
	env, err := Open(body)
	if err != nil {
		return env, ev, err
	}
	if env.Type != ev.Subject() {
		return env, ev, fmt.Errorf("%w: type %q, want %q", ErrMalformed, env.Type, ev.Subject())
	}
	if err := json.Unmarshal(env.Data, &ev); err != nil {
		return env, ev, fmt.Errorf("%w: %s data: %v", ErrMalformed, env.Type, err)
	}
	if err := ev.validate(); err != nil {
		return env, ev, fmt.Errorf("%w: %s: %v", ErrMalformed, env.Type, err)
	}
	return env, ev, nil
}

// ValidSKU reports whether s is a SKU id every service accepts: 1-64 characters of
// A-Z a-z 0-9 . _ : -, starting with a letter or digit. It is part of the contract so that an
// order the order service accepts is never one stock cannot parse.
func ValidSKU(s string) bool { return skuPattern.MatchString(s) }

var skuPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)

// Line is one SKU and quantity of an order.
type Line struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

func validateLines(lines []Line) error {
	if len(lines) == 0 {
		return errors.New("no lines")
	}
	for _, l := range lines {
		if l.SKU == "" || l.Qty <= 0 {
			return fmt.Errorf("bad line %+v", l)
		}
	}
	return nil
}

func need(fields map[string]string) error {
	for name, v := range fields {
		if v == "" {
			return fmt.Errorf("missing %s", name)
		}
	}
	return nil
}
