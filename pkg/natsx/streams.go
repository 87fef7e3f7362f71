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

	"github.com/stockflow/stockflow/pkg/events"
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

// OrderCreatedPartitions is how many partitions the ORDER stream spreads order.created.<key>
// over: it stores each message as order.created.<partition>.<key>, the partition a hash of the
// key (the server's {{partition}} subject mapping), so all the orders of one SKU share a
// partition. Stock runs one consumer per partition, each pinned to one replica at a time
// (PriorityGroup): a hot SKU's locks stay on one replica and combine into large batches
// instead of two replicas' smaller batches queueing on the same stock row. Changing it
// re-maps keys; stock consumes as many partitions as the stream's mapping names, or refuses to
// start (CheckStreams).
const OrderCreatedPartitions = 8

// orderCreatedTransform is the ORDER stream's subject mapping of order.created.<key>.
var orderCreatedTransform = &jetstream.SubjectTransformConfig{
	Source:      events.SubjectOrderCreated + ".*",
	Destination: fmt.Sprintf("%s.{{partition(%d,1)}}.{{wildcard(1)}}", events.SubjectOrderCreated, OrderCreatedPartitions),
}

// OrderCreatedPartition is the filter of partition p of order.created.
func OrderCreatedPartition(p int) string {
	return fmt.Sprintf("%s.%d.*", events.SubjectOrderCreated, p)
}

// PartitionDurable is the name of the durable consumer name runs once per partition, for
// partition p: <name>-p<p>.
func PartitionDurable(name string, p int) string { return fmt.Sprintf("%s-p%d", name, p) }

// Headers of JetStream message schedules (NATS server ≥ 2.12).
const (
	HeaderSchedule       = "Nats-Schedule"        // "@at <RFC3339>" for a one-shot schedule
	HeaderScheduleTarget = "Nats-Schedule-Target" // subject the schedule publishes to, in the same stream
	HeaderScheduler      = "Nats-Scheduler"       // set by the server on a fired message: the schedule's subject
	HeaderScheduleTTL    = "Nats-Schedule-TTL"    // the fired message's time to live (its Nats-TTL)
)

// Retention is how long the event streams keep a message (MaxAge), and a fired deadline
// message stays in SCHEDULES (HeaderScheduleTTL): every order has its own fire subject, so
// without it each fired deadline would stay for ever.
const Retention = 14 * 24 * time.Hour

// DuplicateWindow is how long every stream remembers a Nats-Msg-Id: a republish of the same
// event id within it (relay restart, replica race) is stored once.
const DuplicateWindow = 2 * time.Minute

// StreamConfigs returns the configuration of every stream, each with replicas replicas
// (NATS_STREAM_REPLICAS: 1 on a single server, 3 on a three-node cluster). All streams use file
// storage, limits retention and DuplicateWindow. Event streams keep messages for Retention;
// SCHEDULES has no age limit (a pending schedule must never expire before it fires) and keeps
// one message per subject: a new schedule for an order replaces the old one, as does a new fire
// message. A fired message expires Retention after it fires (per-message TTLs, AllowMsgTTL).
func StreamConfigs(replicas int) []jetstream.StreamConfig {
	event := func(name, desc string, subjects ...string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    subjects,
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			Replicas:    replicas,
			MaxAge:      Retention,
			Duplicates:  DuplicateWindow,
		}
	}
	schedules := event(StreamSchedules, "payment deadline schedules and the messages they fire", SubjectsSchedule, SubjectsFire)
	schedules.MaxAge = 0
	schedules.MaxMsgsPerSubject = 1
	schedules.AllowMsgSchedules = true
	schedules.AllowMsgTTL = true // the fired messages' HeaderScheduleTTL
	schedules.AllowRollup = true // required by schedules; the server would turn it on anyway
	deadLetter := event(StreamDeadLetter, "terminated and exhausted messages, for inspection and replay", SubjectsDeadLetter, SubjectsMaxDeliveries)
	deadLetter.MaxAge = 30 * 24 * time.Hour
	order := event(StreamOrder, "order events", SubjectsOrder)
	order.SubjectTransform = orderCreatedTransform
	return []jetstream.StreamConfig{
		order,
		event(StreamStock, "stock events", SubjectsStock),
		event(StreamPayment, "payment events", SubjectsPayment),
		event(StreamTimeout, "payment deadline expiries", SubjectsTimeout),
		schedules,
		deadLetter,
	}
}

// ApplyStreams creates every stream of StreamConfigs(replicas) that is missing and updates
// every other to that configuration (the server refuses what it cannot change in place, such as
// the storage type). It is the explicit change of stream configuration, `stockflow streams
// apply` or the deployment's nats-streams Job, and only the admin user may run it: nothing
// that starts, services included, ever changes an existing stream.
func ApplyStreams(ctx context.Context, js jetstream.JetStream, replicas int) error {
	for _, cfg := range StreamConfigs(replicas) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("apply stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// CreateStreams creates the streams of StreamConfigs(replicas) that are missing, leaves the
// existing ones as they are, whatever their configuration (a starting process must never
// shrink a cluster's replicas or reset what an operator changed), and returns what
// CheckStreams then finds.
func CreateStreams(ctx context.Context, js jetstream.JetStream, replicas int) ([]string, error) {
	for _, cfg := range StreamConfigs(replicas) {
		_, err := js.CreateStream(ctx, cfg)
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
	}
	return CheckStreams(ctx, js, replicas)
}

// ErrStreamsNotReady is wrapped by CheckStreams when a stream is missing or differs from
// StreamConfigs in a setting the services cannot work without.
var ErrStreamsNotReady = errors.New("streams not set up by the NATS admin")

// CheckStreams compares every stream on the server with StreamConfigs(replicas). It returns an
// error wrapping ErrStreamsNotReady when a stream is missing or differs in a setting the
// services rely on to work at all (subjects, retention, messages per subject, message
// schedules), and otherwise the list of lesser differences (replicas, storage, max age,
// duplicate window): a service starts with those and logs them, as `stockflow streams check`
// prints them. It only reads stream info, which every service user may.
func CheckStreams(ctx context.Context, js jetstream.JetStream, replicas int) ([]string, error) {
	var blocking, drifts []string
	for _, want := range StreamConfigs(replicas) {
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			blocking = append(blocking, want.Name+" is missing")
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("check stream %s: %w", want.Name, err)
		}
		b, d := drift(want, s.CachedInfo().Config)
		if len(b) > 0 {
			blocking = append(blocking, want.Name+" differs in "+strings.Join(b, ", "))
		}
		if len(d) > 0 {
			drifts = append(drifts, want.Name+" differs in "+strings.Join(d, ", "))
		}
	}
	if len(blocking) > 0 {
		return drifts, fmt.Errorf("%w: %s; the admin applies the configuration with `stockflow streams apply` (the nats-streams Job in deploy/k8s)",
			ErrStreamsNotReady, strings.Join(blocking, ", "))
	}
	return drifts, nil
}

// drift names the settings of got that differ from want: those the services cannot work
// without, then the others.
func drift(want, got jetstream.StreamConfig) (blocking, other []string) {
	// The server stores an unlimited per-subject limit, asked for as 0, as -1.
	perSubject := func(n int64) int64 {
		if n <= 0 {
			return -1
		}
		return n
	}
	for _, f := range []struct {
		name     string
		same     bool
		blocking bool
	}{
		{"subjects", slices.Equal(got.Subjects, want.Subjects), true},
		// Without a mapping every order.created.<key> stays unpartitioned, which stock's
		// consumer of the unpartitioned subjects takes: slower, not wrong. A different mapping
		// may fill partitions no consumer of this build reads.
		{"subject transform", sameTransform(got.SubjectTransform, want.SubjectTransform), got.SubjectTransform != nil},
		{"retention", got.Retention == want.Retention, true},
		{"max messages per subject", perSubject(got.MaxMsgsPerSubject) == perSubject(want.MaxMsgsPerSubject), true},
		{"message schedules", got.AllowMsgSchedules == want.AllowMsgSchedules, true},
		// A schedule that sets its fired message's TTL is refused by a stream without them.
		{"message TTLs", got.AllowMsgTTL || !want.AllowMsgTTL, true},
		{fmt.Sprintf("replicas (%d, configured %d)", got.Replicas, want.Replicas), got.Replicas == want.Replicas, false},
		{"storage", got.Storage == want.Storage, false},
		{"max age", got.MaxAge == want.MaxAge, false},
		{"duplicate window", got.Duplicates == want.Duplicates, false},
	} {
		switch {
		case f.same:
		case f.blocking:
			blocking = append(blocking, f.name)
		default:
			other = append(other, f.name)
		}
	}
	return blocking, other
}

func sameTransform(a, b *jetstream.SubjectTransformConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// PrepareStreams readies the streams before a service uses them and returns the lesser
// differences CheckStreams found, for the service to log. A server that requires no
// authentication (a development server, natstest's embedded one) lets anyone create streams, so
// the service creates the missing ones itself (CreateStreams). On a server that requires
// authentication a service user may not (PermissionsOf) and only checks that the admin did.
// Neither ever changes an existing stream.
func PrepareStreams(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, replicas int) ([]string, error) {
	if !nc.AuthRequired() {
		return CreateStreams(ctx, js, replicas)
	}
	return CheckStreams(ctx, js, replicas)
}

// ScheduleSubject is the subject of orderID's pending deadline schedule.
func ScheduleSubject(orderID string) string { return SubjectSchedulePrefix + orderID }

// FireSubject is the subject orderID's schedule publishes to when it fires.
func FireSubject(orderID string) string { return SubjectFirePrefix + orderID }

// ScheduleHeaders returns the headers that turn a message published on ScheduleSubject(orderID)
// into a one-shot schedule: the server stores it and, at at (whole seconds, UTC), publishes a
// copy of its body and other headers to FireSubject(orderID), to expire Retention later, then
// deletes the schedule. Put them in an events.Message's Headers to schedule through the
// outbox. A later schedule for the same order replaces the pending one; an at in the past
// fires at once.
func ScheduleHeaders(orderID string, at time.Time) (map[string]string, error) {
	if err := checkToken(orderID); err != nil {
		return nil, fmt.Errorf("schedule headers: %w", err)
	}
	return map[string]string{
		HeaderSchedule:       "@at " + at.UTC().Format(time.RFC3339),
		HeaderScheduleTarget: FireSubject(orderID),
		HeaderScheduleTTL:    Retention.String(),
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
