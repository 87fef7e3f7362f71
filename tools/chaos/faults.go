package chaos

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/tools/launcher"
)

// proxies are the toxiproxies between each service and each of its dependencies, made on
// first use by launcher.Options.Route and kept for the service's restarts.
type proxies struct {
	server *toxiproxy.ApiServer
	mu     sync.Mutex
	byKey  map[string]*toxiproxy.Proxy // "svc dep" (and the upstream, for a cluster's nodes)
}

func newProxies() *proxies {
	return &proxies{server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		byKey: map[string]*toxiproxy.Proxy{}}
}

// route is launcher.Options.Route: the address of the proxy from svc to upstream.
func (p *proxies) route(svc, dep, upstream string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := svc + " " + dep + " " + upstream
	if px, ok := p.byKey[key]; ok {
		return px.Listen
	}
	px := toxiproxy.NewProxy(p.server, key, "127.0.0.1:0", upstream)
	if err := px.Start(); err != nil {
		return upstream // the run goes on without faults on this link; its faults say so
	}
	p.byKey[key] = px
	return px.Listen
}

// of are the proxies from svc to dep (one per node of a NATS cluster).
func (p *proxies) of(svc, dep string) []*toxiproxy.Proxy {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*toxiproxy.Proxy
	for key, px := range p.byKey {
		if strings.HasPrefix(key, svc+" "+dep+" ") {
			out = append(out, px)
		}
	}
	return out
}

func (p *proxies) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, px := range p.byKey {
		px.Stop()
	}
}

// errLater asks the schedule to try a step again half a second later.
var errLater = errors.New("not now")

// step is one thing the schedule does at a moment of the run.
type step struct {
	At   time.Duration
	Text string
	Do   func(ctx context.Context, r *runner) error
}

// fault is a fault of the schedule: it starts at At and, for one with a duration, ends For
// later (heal).
type fault struct {
	At     time.Duration
	For    time.Duration
	Kind   string // what the check table counts: kill, nats, postgres, latency, reset, cut, clock
	Text   string
	Inject func(ctx context.Context, r *runner) error
	Heal   func(ctx context.Context, r *runner) error
}

// Kinds of faults; a run injects each at least once.
const (
	KindKill     = "SIGKILL of a service"
	KindNATS     = "SIGKILL + restart of nats-server"
	KindPostgres = "restart of PostgreSQL"
	KindLatency  = "network latency"
	KindReset    = "connection resets"
	KindCut      = "network cut"
	KindClock    = "clock step"
)

// Kinds lists every kind, in the report's order.
var Kinds = []string{KindKill, KindNATS, KindPostgres, KindLatency, KindReset, KindCut, KindClock}

// schedule is the run's faults: every kind at least once, each at a random point of its slot
// (the seed makes a run repeatable). span is the part of the sale they fall in; long is the
// long form: each service killed three times, PostgreSQL down for five minutes.
func schedule(rng *mrand.Rand, span time.Duration, long bool, natsNodes int, pgLong time.Duration) []fault {
	at := func(frac float64) time.Duration { // a random point in the 4%-wide slot starting at frac
		return time.Duration((frac + rng.Float64()*0.04) * float64(span))
	}
	var fs []fault
	kills := map[string][]float64{
		"order": {0.08, 0.62}, "stock": {0.16, 0.50}, "payment-adapter": {0.26, 0.84}, "timeout": {0.44, 0.90},
	}
	if long {
		kills = map[string][]float64{
			"order": {0.06, 0.40, 0.80}, "stock": {0.10, 0.50, 0.86}, "payment-adapter": {0.22, 0.56, 0.90}, "timeout": {0.30, 0.66, 0.94},
		}
	}
	for svc, fracs := range kills {
		for _, f := range fracs {
			fs = append(fs, fault{At: at(f), Kind: KindKill, Text: "SIGKILL " + svc,
				Inject: func(_ context.Context, r *runner) error {
					if r.sys.Exited(svc) {
						return errLater // it is being restarted: kill it once it runs
					}
					return r.sys.Kill(svc)
				}})
		}
	}
	fs = append(fs,
		// Each service gets at least one fault on its link to PostgreSQL and one on NATS.
		latency(at(0.04), span/6, "stock", launcher.DepPostgres),
		latency(at(0.58), span/6, "order", launcher.DepNATS),
		latency(at(0.12), span/8, "payment-adapter", launcher.DepPostgres),
		resets(at(0.20), span/16, "payment-adapter", launcher.DepNATS),
		resets(at(0.70), span/16, "stock", launcher.DepPostgres),
		resets(at(0.64), span/16, "timeout", launcher.DepPostgres),
		cut(at(0.46), span/10, "order", launcher.DepPostgres),
		cut(at(0.80), span/10, "stock", launcher.DepNATS),
		cut(at(0.34), span/12, "timeout", launcher.DepNATS),
		clockStep(at(0.30), span/4, "timeout", 20*time.Second),
	)
	// PostgreSQL's two crashes never overlap. The short sale has the brief one first and the
	// long one late; the long sale has the five-minute one early, so that the sale goes on for
	// minutes after it, and the brief one after it.
	if long {
		fs = append(fs, pgRestart(at(0.04), pgLong), pgRestart(at(0.86), 3*time.Second))
	} else {
		fs = append(fs, pgRestart(at(0.36), 3*time.Second), pgRestart(at(0.74), pgLong))
	}
	if natsNodes <= 1 {
		fs = append(fs, natsKill(at(0.54), 2*time.Second, ""))
	} else {
		fs = append(fs, natsKill(at(0.24), 5*time.Second, "nats-2"), natsKill(at(0.54), 5*time.Second, "leader"))
	}
	slices.SortFunc(fs, func(a, b fault) int { return int(a.At - b.At) })
	return fs
}

func latency(at, d time.Duration, svc, dep string) fault {
	return toxic(at, d, KindLatency, svc, dep, fmt.Sprintf("%s → %s latency 150±50 ms", svc, dep),
		`{"name":"latency","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":150,"jitter":50}}`)
}

func resets(at, d time.Duration, svc, dep string) fault {
	return toxic(at, d, KindReset, svc, dep, fmt.Sprintf("%s → %s connections reset (TCP RST)", svc, dep),
		`{"name":"reset","type":"reset_peer","stream":"upstream","toxicity":1,"attributes":{"timeout":0}}`)
}

// toxic adds toxiproxy toxics (JSON specs) to every proxy from svc to dep for d. A cut or
// resets stop svc as surely as its dependency's outage would: they count as an outage.
func toxic(at, d time.Duration, kind, svc, dep, text string, specs ...string) fault {
	var names []string
	var from time.Time
	return fault{At: at, For: d, Kind: kind, Text: text,
		Inject: func(_ context.Context, r *runner) error {
			names, from = names[:0], time.Now()
			for _, px := range r.proxies.of(svc, dep) {
				for _, spec := range specs {
					t, err := px.Toxics.AddToxicJson(strings.NewReader(spec))
					if err != nil {
						return err
					}
					names = append(names, t.Name)
				}
			}
			return r.linked(svc, dep)
		},
		Heal: func(ctx context.Context, r *runner) error {
			for _, px := range r.proxies.of(svc, dep) {
				for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
					if err := px.Toxics.RemoveToxic(ctx, name); err != nil {
						return err
					}
				}
			}
			if kind != KindLatency {
				r.outage(from, time.Now())
			}
			return nil
		}}
}

// cut drops everything between svc and dep, both ways, for d: connections open stay open
// and hear nothing, new ones are accepted and hear nothing (a toxiproxy timeout toxic of 0: a
// partition, not a refusal). The proxy is not stopped: its port, given back to the system,
// could be taken by any socket meanwhile.
func cut(at, d time.Duration, svc, dep string) fault {
	return toxic(at, d, KindCut, svc, dep, fmt.Sprintf("%s ✕ %s cut", svc, dep),
		`{"name":"cut-up","type":"timeout","stream":"upstream","toxicity":1,"attributes":{"timeout":0}}`,
		`{"name":"cut-down","type":"timeout","stream":"downstream","toxicity":1,"attributes":{"timeout":0}}`)
}

// clockStep restarts svc with its clock ahead by skew, and after d restarts it with the true
// clock: the two steps a wrongly set and then corrected system clock makes.
func clockStep(at, d time.Duration, svc string, skew time.Duration) fault {
	return fault{At: at, For: d, Kind: KindClock, Text: fmt.Sprintf("%s's clock steps %s ahead (and back)", svc, skew),
		Inject: func(_ context.Context, r *runner) error {
			r.sys.SetServiceEnv(svc, "CLOCK_OFFSET="+skew.String())
			return restart(r, svc) // the keeper starts it with the offset
		},
		Heal: func(_ context.Context, r *runner) error {
			r.sys.SetServiceEnv(svc)
			return restart(r, svc)
		}}
}

// restart kills svc so that the keeper starts it again; one already down starts anyway.
func restart(r *runner, svc string) error {
	if r.sys.Exited(svc) {
		return nil
	}
	return r.sys.Kill(svc)
}

// pgRestart stops PostgreSQL as a crash would and starts it after d. Its start (crash
// recovery) runs beside the schedule, which goes on meanwhile.
func pgRestart(at, d time.Duration) fault {
	var down time.Time
	return fault{At: at, For: d, Kind: KindPostgres, Text: fmt.Sprintf("PostgreSQL crashes, restarted after %s", d),
		Inject: func(ctx context.Context, r *runner) error {
			down = time.Now()
			return r.sys.StopPostgres(ctx)
		},
		Heal: func(ctx context.Context, r *runner) error {
			r.background("PostgreSQL", func() error {
				err := r.sys.StartPostgres(ctx)
				r.outage(down, time.Now())
				return err
			})
			return nil
		}}
}

// natsKill SIGKILLs a nats-server (node "" is the single server; "leader" the node leading
// the STOCK stream at that moment) and starts it again after d.
func natsKill(at, d time.Duration, node string) fault {
	text := "SIGKILL nats-server"
	switch node {
	case "leader":
		text = "SIGKILL the nats node leading STOCK"
	case "":
	default:
		text = "SIGKILL nats node " + node
	}
	var killed string
	var down time.Time
	return fault{At: at, For: d, Kind: KindNATS, Text: fmt.Sprintf("%s, restarted after %s", text, d),
		Inject: func(ctx context.Context, r *runner) error {
			killed, down = node, time.Now()
			switch node {
			case "":
				killed = "nats"
			case "leader":
				var err error
				if killed, err = r.streamLeader(ctx, natsx.StreamStock); err != nil {
					return err
				}
			}
			r.notef("  nats node %s killed", killed)
			return r.sys.KillNATS(killed)
		},
		Heal: func(ctx context.Context, r *runner) error {
			err := r.sys.StartNATS(ctx, killed)
			if r.cfg.NATSNodes <= 1 { // the only server: everything waited for it
				r.outage(down, time.Now())
			}
			return err
		}}
}

// streamLeader is the launcher node name of the server leading stream.
func (r *runner) streamLeader(ctx context.Context, stream string) (string, error) {
	nc, js, err := natsx.Connect(ctx, r.sys.NATSURL, "stockflow-chaos")
	if err != nil {
		return "", err
	}
	defer nc.Close()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	var info *jetstream.StreamInfo
	if info, err = s.Info(ctx); err != nil {
		return "", err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("stream %s has no leader", stream)
	}
	return strings.TrimPrefix(info.Cluster.Leader, "stockflow-"), nil
}

// linked fails when svc has no proxy to dep: the fault would be injected nowhere.
func (r *runner) linked(svc, dep string) error {
	if len(r.proxies.of(svc, dep)) == 0 {
		return fmt.Errorf("no proxy from %s to %s", svc, dep)
	}
	return nil
}

// steps turns faults into the timeline's steps: each injection, and each heal For later.
func steps(fs []fault) []step {
	var out []step
	for _, f := range fs {
		out = append(out, step{At: f.At, Text: f.Text, Do: f.Inject})
		if f.Heal != nil {
			out = append(out, step{At: f.At + f.For, Text: "  healed: " + f.Text, Do: f.Heal})
		}
	}
	slices.SortStableFunc(out, func(a, b step) int { return int(a.At - b.At) })
	return out
}
