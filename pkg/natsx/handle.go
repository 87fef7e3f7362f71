package natsx

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/inbox"
)

// This file is the one shape every stockflow consumer has: decode the event, run the use case
// with the message's inbox identity, and say what its error means for the acknowledgement.
// A service's consumers package then only names, per consumer, the use case and its errors.

// Errors declares how a consumer's domain errors map to the acknowledgement. An error that
// matches (errors.Is) one of Retry is retried, even when it also matches one of Permanent (an
// error may wrap several); one that matches Permanent can never succeed and is dead-lettered;
// any other error is retried. The zero Errors retries every error of the use case. Malformed
// messages and errors already marked Permanent are poison whatever Errors says.
type Errors struct {
	Permanent []error
	Retry     []error
}

func (e Errors) mark(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	for _, r := range e.Retry {
		if errors.Is(err, r) {
			return err
		}
	}
	for _, p := range e.Permanent {
		if errors.Is(err, p) {
			return Permanent(err)
		}
	}
	return err
}

// Use is a use case run for one message carrying an event E. in names the message in the
// inbox: the durable consumer and the event id (the envelope's, which is also its Nats-Msg-Id).
type Use[E events.Payload] func(ctx context.Context, in inbox.Message, ev E) error

// On returns the Handler of consumer, a durable consumer of events E: it decodes each message
// with events.Decode[E] (a malformed one is poison and never reaches use), runs use, and
// returns use's error marked as errs says, every error prefixed with the consumer name.
func On[E events.Payload](consumer string, errs Errors, use Use[E]) Handler {
	run := decoding(use)
	return func(ctx context.Context, msg jetstream.Msg) error {
		return outcome(consumer, errs, run(ctx, consumer, msg))
	}
}

// OnMessage is On for a consumer whose messages are not pkg/events envelopes (timeout's fired
// schedules): h decodes the message itself, and OnMessage marks and prefixes its error.
func OnMessage(consumer string, errs Errors, h Handler) Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		return outcome(consumer, errs, h(ctx, msg))
	}
}

// A Branch is one subject's share of a Switch; Case makes it.
type Branch struct {
	subject string
	run     func(ctx context.Context, consumer string, msg jetstream.Msg) error
}

// Case is the Branch of a Switch for the events E, on E's subject: its messages are decoded
// and run as On does.
func Case[E events.Payload](use Use[E]) Branch {
	var ev E
	return Branch{subject: ev.Subject(), run: decoding(use)}
}

// Switch returns the Handler of consumer, a durable consumer of several subjects: each message
// goes to the Case of its subject, and one on any other subject is poison. Errors are marked
// and prefixed as On does. Two cases for one subject are a programming error: Switch panics,
// as http.ServeMux does for a pattern registered twice, when the consumers are wired.
func Switch(consumer string, errs Errors, cases ...Branch) Handler {
	routes := make(map[string]Branch, len(cases))
	for _, c := range cases {
		if _, dup := routes[c.subject]; dup {
			panic(fmt.Sprintf("natsx.Switch %s: two cases for subject %s", consumer, c.subject))
		}
		routes[c.subject] = c
	}
	return func(ctx context.Context, msg jetstream.Msg) error {
		c, ok := routes[msg.Subject()]
		if !ok {
			return outcome(consumer, errs, Permanent(fmt.Errorf("unexpected subject %s", msg.Subject())))
		}
		return outcome(consumer, errs, c.run(ctx, consumer, msg))
	}
}

func decoding[E events.Payload](use Use[E]) func(context.Context, string, jetstream.Msg) error {
	return func(ctx context.Context, consumer string, msg jetstream.Msg) error {
		env, ev, err := events.Decode[E](msg.Data())
		if err != nil {
			return err // wraps events.ErrMalformed: poison
		}
		return use(ctx, inbox.Message{Consumer: consumer, ID: env.ID}, ev)
	}
}

func outcome(consumer string, errs Errors, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", consumer, errs.mark(err))
}
