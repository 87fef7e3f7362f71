package natsx

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream names and the subjects each captures. Every event subject in pkg/events falls in
// exactly one stream.
const (
	StreamOrder   = "ORDER"
	SubjectsOrder = "order.>"

	StreamStock   = "STOCK"
	SubjectsStock = "stock.>"

	StreamPayment   = "PAYMENT"
	SubjectsPayment = "payment.>"

	StreamTimeout   = "TIMEOUT"
	SubjectsTimeout = "timeout.expired"

	// StreamSchedules holds the pending payment-deadline schedules (one per order, on
	// SubjectSchedulePrefix+orderID) and the messages they fire (SubjectFirePrefix+orderID).
	StreamSchedules         = "SCHEDULES"
	SubjectsSchedule        = "timeout.schedule.>"
	SubjectsFire            = "timeout.fire.>"
	SubjectSchedulePrefix   = "timeout.schedule."
	SubjectFirePrefix       = "timeout.fire."
	StreamDeadLetter        = "DEADLETTER"
	SubjectsDeadLetter      = "deadletter.>"
	SubjectDeadLetterPrefix = "deadletter."
	// SubjectsMaxDeliveries captures the server's max-deliveries advisories: the one case a
	// message exhausts MaxDeliver without Consume seeing its last delivery fail (the handler
	// hung or the process died on it). Consume itself dead-letters every other exhaustion.
	SubjectsMaxDeliveries = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>"
)

// Headers of JetStream message schedules (NATS server ≥ 2.12).
const (
	HeaderSchedule       = "Nats-Schedule"        // "@at <RFC3339>" for a one-shot schedule
	HeaderScheduleTarget = "Nats-Schedule-Target" // subject the schedule publishes to, in the same stream
	HeaderScheduler      = "Nats-Scheduler"       // set by the server on a fired message: the schedule's subject
)

// DuplicateWindow is how long every stream remembers a Nats-Msg-Id: a republish of the same
// event id within it (relay restart, replica race) is stored once.
const DuplicateWindow = 2 * time.Minute

// StreamConfigs returns the configuration EnsureStreams applies. All streams use file storage,
// one replica, limits retention and DuplicateWindow. Event streams keep 14 days; SCHEDULES has
// no age limit (a pending schedule must never expire before it fires) and keeps one message
// per subject: a new schedule for an order replaces the old one, as does a new fire message.
func StreamConfigs() []jetstream.StreamConfig {
	event := func(name, desc string, subjects ...string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    subjects,
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			Replicas:    1,
			MaxAge:      14 * 24 * time.Hour,
			Duplicates:  DuplicateWindow,
		}
	}
	schedules := event(StreamSchedules, "payment deadline schedules and the messages they fire", SubjectsSchedule, SubjectsFire)
	schedules.MaxAge = 0
	schedules.MaxMsgsPerSubject = 1
	schedules.AllowMsgSchedules = true
	schedules.AllowRollup = true // required by schedules; the server would turn it on anyway
	deadLetter := event(StreamDeadLetter, "terminated and exhausted messages, for inspection and replay", SubjectsDeadLetter, SubjectsMaxDeliveries)
	deadLetter.MaxAge = 30 * 24 * time.Hour
	return []jetstream.StreamConfig{
		event(StreamOrder, "order events", SubjectsOrder),
		event(StreamStock, "stock events", SubjectsStock),
		event(StreamPayment, "payment events", SubjectsPayment),
		event(StreamTimeout, "payment deadline expiries", SubjectsTimeout),
		schedules,
		deadLetter,
	}
}

// EnsureStreams creates every stream of StreamConfigs, or updates it to that configuration.
// It is idempotent. On a locked-down server only AdminUser may run it: the launcher does before
// it starts the services.
func EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range StreamConfigs() {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// ErrStreamsNotReady is wrapped by CheckStreams when a stream is missing or differs from
// StreamConfigs.
var ErrStreamsNotReady = errors.New("streams not set up by the NATS admin")

// CheckStreams reports, wrapping ErrStreamsNotReady, every stream of StreamConfigs that is
// missing or whose subjects, retention, storage, limits or schedule setting differ. It only
// reads stream info, which every service user may.
func CheckStreams(ctx context.Context, js jetstream.JetStream) error {
	var problems []string
	for _, want := range StreamConfigs() {
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			problems = append(problems, want.Name+" is missing")
			continue
		}
		if err != nil {
			return fmt.Errorf("check stream %s: %w", want.Name, err)
		}
		if d := drift(want, s.CachedInfo().Config); len(d) > 0 {
			problems = append(problems, want.Name+" differs in "+strings.Join(d, ", "))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s; the admin user applies them with natsx.EnsureStreams (stockflow up does, docs/conventions.md)",
			ErrStreamsNotReady, strings.Join(problems, ", "))
	}
	return nil
}

// drift names the settings of got that differ from want among those stockflow relies on.
func drift(want, got jetstream.StreamConfig) []string {
	// The server stores an unlimited per-subject limit, asked for as 0, as -1.
	perSubject := func(n int64) int64 {
		if n <= 0 {
			return -1
		}
		return n
	}
	var d []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"subjects", slices.Equal(got.Subjects, want.Subjects)},
		{"retention", got.Retention == want.Retention},
		{"storage", got.Storage == want.Storage},
		{"max age", got.MaxAge == want.MaxAge},
		{"max messages per subject", perSubject(got.MaxMsgsPerSubject) == perSubject(want.MaxMsgsPerSubject)},
		{"duplicate window", got.Duplicates == want.Duplicates},
		{"message schedules", got.AllowMsgSchedules == want.AllowMsgSchedules},
	} {
		if !f.same {
			d = append(d, f.name)
		}
	}
	return d
}

// PrepareStreams readies the streams before a service uses them. A server that requires no
// authentication (a development server, natstest's embedded one) lets anyone manage streams,
// so the service ensures them itself (EnsureStreams) as every service did before NATS was
// locked down. On a server that requires authentication a service user may not (PermissionsOf)
// and only checks that the admin did (CheckStreams), failing startup otherwise.
func PrepareStreams(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) error {
	if !nc.AuthRequired() {
		return EnsureStreams(ctx, js)
	}
	return CheckStreams(ctx, js)
}

// ScheduleSubject is the subject of orderID's pending deadline schedule.
func ScheduleSubject(orderID string) string { return SubjectSchedulePrefix + orderID }

// FireSubject is the subject orderID's schedule publishes to when it fires.
func FireSubject(orderID string) string { return SubjectFirePrefix + orderID }

// ScheduleHeaders returns the headers that turn a message published on ScheduleSubject(orderID)
// into a one-shot schedule: the server stores it and, at at (whole seconds, UTC), publishes a
// copy of its body and other headers to FireSubject(orderID), then deletes the schedule. Put
// them in an events.Message's Headers to schedule through the outbox. A later schedule for the
// same order replaces the pending one; an at in the past fires at once.
func ScheduleHeaders(orderID string, at time.Time) (map[string]string, error) {
	if err := checkToken(orderID); err != nil {
		return nil, fmt.Errorf("schedule headers: %w", err)
	}
	return map[string]string{
		HeaderSchedule:       "@at " + at.UTC().Format(time.RFC3339),
		HeaderScheduleTarget: FireSubject(orderID),
	}, nil
}

// CancelSchedule removes orderID's pending schedule so it never fires, by purging its schedule
// subject: the server drops a schedule whose message is gone. Cancelling an order without a
// pending schedule (never scheduled, already fired or cancelled) is a no-op. A fire message
// already published is not recalled: consumers of the fire subject must still check their own
// state, as the timeout service does against its deadline table.
func CancelSchedule(ctx context.Context, js jetstream.JetStream, orderID string) error {
	if err := checkToken(orderID); err != nil {
		return fmt.Errorf("cancel schedule: %w", err)
	}
	s, err := js.Stream(ctx, StreamSchedules)
	if err != nil {
		return fmt.Errorf("cancel schedule %s: %w", orderID, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(ScheduleSubject(orderID))); err != nil {
		return fmt.Errorf("cancel schedule %s: %w", orderID, err)
	}
	return nil
}

// checkToken rejects ids that would not be a single subject token.
func checkToken(id string) error {
	if id == "" {
		return errors.New("empty order id")
	}
	if strings.ContainsAny(id, ".*> \t\r\n") {
		return fmt.Errorf("order id %q is not a valid subject token", id)
	}
	return nil
}
