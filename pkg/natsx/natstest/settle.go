package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Settled reports whether the durable consumer on stream has handled every message it takes
// that the stream holds now: none is left to deliver and none is delivered but not yet
// acknowledged or terminated (a message waiting out a NakWithDelay is not). It is the positive
// signal a test waits for before asserting that a message changed nothing.
func Settled(ctx context.Context, js jetstream.JetStream, stream, durable string) (bool, error) {
	c, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		return false, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return false, err
	}
	return info.NumPending == 0 && info.NumAckPending == 0, nil
}

// WaitSettled waits, up to 10 s, until each of durables on stream is Settled, and fails t
// otherwise. Call it after publishing: what is published later is not waited for.
func WaitSettled(t testing.TB, js jetstream.JetStream, stream string, durables ...string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for _, d := range durables {
		for {
			ok, err := Settled(ctx, js, stream, d)
			if err != nil {
				t.Fatalf("natstest: consumer %s/%s: %v", stream, d, err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("natstest: consumer %s/%s did not settle within 10s", stream, d)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
