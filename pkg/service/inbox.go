package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/stockflow/stockflow/pkg/inbox"
	"github.com/stockflow/stockflow/pkg/natsx"
)

// inboxPruneEvery is how often serve deletes the inbox claims older than Base.InboxRetention.
const inboxPruneEvery = time.Hour

// minInboxRetention is the longest an event stream keeps a message (DEADLETTER aside: what it
// holds was never processed, so it has no claim). A claim pruned sooner would let a replay of
// a message still in its stream apply its effect twice.
func minInboxRetention() time.Duration {
	var longest time.Duration
	for _, c := range natsx.StreamConfigs(1) {
		if c.Name != natsx.StreamDeadLetter {
			longest = max(longest, c.MaxAge)
		}
	}
	return longest
}

// pruneInbox is the loop that deletes the claims older than retention from db, at once and
// then every interval, until ctx ends. A failed prune is logged and tried again at the next
// tick: claims kept too long cost disk, not correctness.
func pruneInbox(db inbox.Execer, retention, every time.Duration, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			n, err := inbox.Prune(ctx, db, retention)
			switch {
			case err != nil && ctx.Err() == nil:
				log.WarnContext(ctx, "inbox prune failed; retrying at the next tick", "err", err, "retry_in", every)
			case n > 0:
				log.InfoContext(ctx, "inbox pruned", "claims", n, "older_than", retention.String())
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
}
