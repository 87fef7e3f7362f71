package natsx

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// AdminUser is the NATS user that manages streams and consumers. It may publish and subscribe to
// everything; only the launcher's stream setup (and an operator) connect as it, never a service.
const AdminUser = "admin"

// Permissions is what one NATS user may do, in nats-server's terms: publish to the subjects of
// PublishAllow unless one of PublishDeny matches too (deny wins), and subscribe to those of
// SubscribeAllow. Whatever is not allowed is refused with a permissions violation.
type Permissions struct {
	PublishAllow   []string
	PublishDeny    []string
	SubscribeAllow []string
}

// durable is a durable pull consumer a service runs (its services/<svc>/internal/consumers).
type durable struct{ stream, name string }

// grant is one service's row of the table.
type grant struct {
	owns     []string  // the event subjects its outbox publishes
	durables []durable // the durable consumers it runs
	extra    []string  // further publish subjects, each with its reason
}

// grants is the permission table: the NATS user of each service is named after it. The durable
// names repeat those of the consumers packages; a consumer missing here cannot be created
// under lockdown, which the end-to-end suite shows at once.
var grants = map[string]grant{
	"order": {
		owns:     []string{SubjectsOrder},
		durables: []durable{{StreamStock, "order-stock-outcomes"}, {StreamPayment, "order-payment-outcomes"}, {StreamStock, "order-gate-returns"}},
	},
	"stock": {
		owns: []string{SubjectsStock},
		durables: append([]durable{
			{StreamOrder, "stock-order-created"}, {StreamOrder, "stock-order-requests"},
			{StreamPayment, "stock-payment-succeeded"}, {StreamTimeout, "stock-timeout-expired"},
		}, partitioned(StreamOrder, "stock-order-created", OrderCreatedPartitions)...),
	},
	"payment-adapter": {
		owns: []string{SubjectsPayment},
		durables: []durable{
			{StreamOrder, "payment-adapter-order-created"}, {StreamStock, "payment-adapter-stock-sell-failed"},
			{StreamOrder, "payment-adapter-order-refund-requested"},
			// Its own payment.refund_requested: the provider call of a recorded refund.
			{StreamPayment, "payment-adapter-refund-requested"},
		},
	},
	"timeout": {
		// Not timeout.fire.>: the server publishes fire messages itself, inside the stream.
		owns: []string{SubjectsTimeout, SubjectsSchedule},
		durables: []durable{
			{StreamStock, "timeout-stock-locked"}, {StreamSchedules, "timeout-fire"},
			{StreamStock, "timeout-stock-resolved"},
		},
		// CancelSchedule purges one order's schedule subject. The permission cannot name the
		// subject, so timeout could purge every pending schedule of the stream it alone writes;
		// its deadline sweeper still expires those orders.
		extra: []string{"$JS.API.STREAM.PURGE." + StreamSchedules},
	},
}

// partitioned names the durables of a consumer run once per partition (PartitionDurable).
func partitioned(stream, name string, partitions int) []durable {
	ds := make([]durable, partitions)
	for p := range ds {
		ds[p] = durable{stream, PartitionDurable(name, p)}
	}
	return ds
}

// adminOnly is refused to every service user even if an allow entry would match: creating,
// changing and deleting streams, and deleting their messages.
var adminOnly = []string{
	"$JS.API.STREAM.CREATE.>",
	"$JS.API.STREAM.UPDATE.>",
	"$JS.API.STREAM.DELETE.>",
	"$JS.API.STREAM.MSG.DELETE.>",
}

// ServiceUsers are the NATS users of the four services, named after them, in a fixed order.
func ServiceUsers() []string { return []string{"order", "stock", "payment-adapter", "timeout"} }

// Users are AdminUser and ServiceUsers: everyone the locked-down server knows.
func Users() []string { return append([]string{AdminUser}, ServiceUsers()...) }

// InboxPrefix is the reply-subject prefix of user's connections (Connect sets it from the URL):
// a service user may subscribe only below its own prefix, so it cannot read the replies and
// pulled messages of another service.
func InboxPrefix(user string) string { return "_INBOX." + user }

// PermissionsOf returns user's permissions; ok is false for a user the table does not know.
//
// AdminUser may publish and subscribe to everything. A service user may publish:
//   - the event subjects it owns: order order.>, stock stock.>, payment-adapter payment.>,
//     timeout timeout.expired and timeout.schedule.>;
//   - deadletter.<subject> for the subjects of the streams it consumes (Consume's dead letters);
//   - $JS.API.STREAM.INFO.<stream> for every stream (CheckStreams, reconcile);
//   - for each of its durable consumers: $JS.API.CONSUMER.CREATE, .INFO, .MSG.NEXT and .UNPIN
//     .<stream>.<durable>, and the acks $JS.ACK.<stream>.<durable>.> (the server's v1 ack
//     subjects, its default);
//   - on DEADLETTER, consumers of any name: CREATE, MSG.NEXT and DELETE, for the ordered
//     consumer with which the outbox reconcile job counts dead letters (it deletes its previous
//     ephemeral consumer on every fetch); no service runs a durable there;
//   - timeout only: $JS.API.STREAM.PURGE.SCHEDULES (CancelSchedule).
//
// and subscribe only to its own replies, InboxPrefix(user).>. Everything else is refused:
// other services' subjects, other consumers, purging or deleting streams, deleting consumers
// of the event streams; adminOnly is denied outright.
func PermissionsOf(user string) (Permissions, bool) {
	if user == AdminUser {
		return Permissions{PublishAllow: []string{">"}, SubscribeAllow: []string{">"}}, true
	}
	g, ok := grants[user]
	if !ok {
		return Permissions{}, false
	}
	pub := slices.Clone(g.owns)
	for _, d := range g.durables {
		for _, s := range streamSubjects(d.stream) {
			pub = append(pub, SubjectDeadLetterPrefix+s)
		}
	}
	for _, cfg := range StreamConfigs(1) {
		pub = append(pub, "$JS.API.STREAM.INFO."+cfg.Name)
	}
	for _, d := range g.durables {
		sd := d.stream + "." + d.name
		pub = append(pub,
			"$JS.API.CONSUMER.CREATE."+sd,
			"$JS.API.CONSUMER.INFO."+sd,
			"$JS.API.CONSUMER.MSG.NEXT."+sd,
			"$JS.API.CONSUMER.UNPIN."+sd,
			"$JS.ACK."+sd+".>")
	}
	for _, api := range []string{"CREATE", "MSG.NEXT", "DELETE"} {
		pub = append(pub, "$JS.API.CONSUMER."+api+"."+StreamDeadLetter+".*")
	}
	pub = append(pub, g.extra...)
	return Permissions{
		PublishAllow:   uniq(pub),
		PublishDeny:    slices.Clone(adminOnly),
		SubscribeAllow: []string{InboxPrefix(user) + ".>"},
	}, true
}

// streamSubjects are the subjects stream captures.
func streamSubjects(stream string) []string {
	for _, cfg := range StreamConfigs(1) {
		if cfg.Name == stream {
			return cfg.Subjects
		}
	}
	panic("natsx: permission table names unknown stream " + stream)
}

// uniq drops repeats, keeping the first of each.
func uniq(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// NewPasswords returns a fresh random password (192 bits, hex) for each of Users.
func NewPasswords() (map[string]string, error) {
	pw := map[string]string{}
	for _, u := range Users() {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("nats passwords: %w", err)
		}
		pw[u] = hex.EncodeToString(b)
	}
	return pw, nil
}

// AuthorizationConfig renders the nats-server configuration block that gives each of Users its
// password from passwords and its PermissionsOf. It fails when a user has no password.
func AuthorizationConfig(passwords map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("authorization {\n  users = [\n")
	for _, u := range Users() {
		pw := passwords[u]
		if pw == "" {
			return "", fmt.Errorf("nats authorization: no password for user %s", u)
		}
		p, _ := PermissionsOf(u)
		fmt.Fprintf(&b, "    {\n      user: %s\n      password: %s\n      permissions: {\n", ConfString(u), ConfString(pw))
		fmt.Fprintf(&b, "        publish: {\n          allow: %s\n", confList(p.PublishAllow))
		if len(p.PublishDeny) > 0 {
			fmt.Fprintf(&b, "          deny: %s\n", confList(p.PublishDeny))
		}
		fmt.Fprintf(&b, "        }\n        subscribe: {\n          allow: %s\n        }\n      }\n    }\n", confList(p.SubscribeAllow))
	}
	b.WriteString("  ]\n}\n")
	return b.String(), nil
}

func confList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = ConfString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// ConfString quotes s for a nats-server configuration file. Double-quoted strings are taken
// literally (a "$JS…" subject is not a variable) except for the escapes the parser knows:
// \" \\ and \xXX, used here for control characters.
func ConfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := range len(s) {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// WithCredentials returns the nats:// URL rawURL with user and password in place of any it had.
func WithCredentials(rawURL, user, password string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("nats url: %w", err)
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}

// Redact is rawURL without its passwords, for logs and errors (rawURL may list several
// servers, comma-separated).
func Redact(rawURL string) string {
	urls := strings.Split(rawURL, ",")
	for i, one := range urls {
		u, err := url.Parse(one)
		if err != nil {
			return "(unparsable nats url)"
		}
		urls[i] = u.Redacted()
	}
	return strings.Join(urls, ",")
}
