// Package natsx is stockflow's JetStream plumbing: the connection, every stream the system
// uses (ApplyStreams, CreateStreams, CheckStreams), message schedules for payment deadlines,
// and Consume, which runs a durable pull consumer and maps a handler's result to exactly one
// acknowledgement:
//
//	nil                      → Ack (also for "already done": the handler returns nil)
//	Permanent(err), or an
//	error wrapping
//	events.ErrMalformed      → copy to DEADLETTER, then TermWithReason; counted in a metric
//	any other error          → NakWithDelay, the delay growing with the delivery count; on the
//	                           last allowed delivery (MaxDeliver) it is dead-lettered and
//	                           terminated like a poison message instead
//	Unavailable(err)         → the same, with OutageMaxDeliver deliveries (hours): a
//	                           dependency is down, the message is not at fault
//	RetryAfter(err, d)       → the same, NakWithDelay(d): the message came early and is
//	                           due after d
//
// On, Switch and OnMessage are the one shape of a consumer's handler: decode with pkg/events,
// run the use case with the message's inbox identity, and mark its errors as the consumer's
// Errors declare. Payloads themselves are pkg/events' business, not this package's.
package natsx

import (
	"context"
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishWindow is how many asynchronous publishes may await their acks at once. The outbox
// relay publishes a batch at a time, so a batch may not be larger (OUTBOX_RELAY_BATCH): past
// the window a publish stalls and fails (review F17).
const PublishWindow = 1024

// Connect dials the NATS server at url as client name and returns the connection and its
// JetStream context. The connection reconnects forever (every second, with jitter) and buffers
// up to 8 MiB of publishes while disconnected, so a NATS restart is a pause, not an outage;
// disconnects and reconnects are logged with slog.Default(). The first dial is not retried:
// a wrong URL fails startup. Close the connection with nc.Drain() on shutdown.
//
// Credentials come in the URL (nats://user:password@host:port); a connection with a user takes
// its replies under InboxPrefix(user), the only inbox its permissions let it subscribe to.
// Errors name the URL without its password.
func Connect(ctx context.Context, url, name string) (*nats.Conn, jetstream.JetStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("connect to nats: %w", err)
	}
	log := slog.Default().With("nats_client", name)
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.ReconnectBufSize(8 << 20),
		nats.Timeout(5 * time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: closed on purpose
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("nats async error", "subject", subject, "err", err)
		}),
	}
	// url may list several servers (a cluster's nodes), each with the same user.
	if u, err := neturl.Parse(strings.Split(url, ",")[0]); err == nil && u.User.Username() != "" {
		opts = append(opts, nats.CustomInboxPrefix(InboxPrefix(u.User.Username())))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to nats %s: %w", Redact(url), err)
	}
	js, err := jetstream.New(nc,
		// An async publish whose ack never comes fails instead of hanging the outbox relay.
		jetstream.WithPublishAsyncTimeout(10*time.Second),
		jetstream.WithPublishAsyncMaxPending(PublishWindow),
	)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream context: %w", err)
	}
	return nc, js, nil
}
