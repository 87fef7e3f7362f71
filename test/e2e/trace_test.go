package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/telemetry"
)

// traces is the OTLP/HTTP receiver every service of the shared system exports its spans to
// (TestMain points OTEL_EXPORTER_OTLP_TRACES_ENDPOINT at it).
var traces *traceReceiver

// span is what the tests need of a received span.
type span struct {
	TraceID, SpanID, Parent string // hex; Parent "" for a root
	Name, Service           string // Service: the resource's service.name
	Kind                    tracepb.Span_SpanKind
	Links                   []link
}

type link struct{ TraceID, SpanID, Why string } // Why: the stockflow.link attribute

func (s span) String() string {
	return fmt.Sprintf("%s %q (%s) span %s parent %s", s.Service, s.Name, s.Kind, s.SpanID, s.Parent)
}

// traceReceiver is an OTLP/HTTP collector of one endpoint, POST /v1/traces (protobuf,
// optionally gzip), keeping the spans it gets by trace id. It keeps at most maxSpans, so a
// long suite of load tests cannot make it grow without bound; the trace test runs on a
// handful.
type traceReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	byID   map[string][]span
	n      int
	failed int // requests it could not decode
}

const maxSpans = 500_000

func newTraceReceiver() *traceReceiver {
	r := &traceReceiver{byID: map[string][]span{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.export)
	r.Server = httptest.NewServer(mux)
	return r
}

func (r *traceReceiver) export(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(w, err)
			return
		}
		defer gz.Close()
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		r.fail(w, err)
		return
	}
	var in coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &in); err != nil {
		r.fail(w, err)
		return
	}
	r.add(&in)
	out, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	if err != nil {
		r.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *traceReceiver) fail(w http.ResponseWriter, err error) {
	r.mu.Lock()
	r.failed++
	r.mu.Unlock()
	http.Error(w, err.Error(), http.StatusBadRequest)
}

func (r *traceReceiver) add(in *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range in.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				if r.n >= maxSpans {
					return
				}
				got := span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Parent: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Service: service, Kind: s.GetKind(),
				}
				for _, l := range s.GetLinks() {
					lk := link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())}
					for _, kv := range l.GetAttributes() {
						if kv.GetKey() == telemetry.LinkAttribute {
							lk.Why = kv.GetValue().GetStringValue()
						}
					}
					got.Links = append(got.Links, lk)
				}
				r.byID[got.TraceID] = append(r.byID[got.TraceID], got)
				r.n++
			}
		}
	}
}

// trace returns the spans received so far of trace id.
func (r *traceReceiver) trace(id string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byID[id])
}

// linkedTo returns the spans received so far, of any trace, with a link into trace id.
func (r *traceReceiver) linkedTo(id string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []span
	for _, spans := range r.byID {
		for _, s := range spans {
			if slices.ContainsFunc(s.Links, func(l link) bool { return l.TraceID == id }) {
				out = append(out, s)
			}
		}
	}
	return out
}

// find returns the span of service named name, if spans has one.
func find(spans []span, service, name string) (span, bool) {
	i := slices.IndexFunc(spans, func(s span) bool { return s.Service == service && s.Name == name })
	if i < 0 {
		return span{}, false
	}
	return spans[i], true
}

// requireEdges waits until trace id holds a span for each edge's child, then asserts each
// edge: child's parent is parent. Edges are {child service, child name, parent service,
// parent name}. It returns the trace's spans.
func requireEdges(t *testing.T, id string, edges [][4]string) []span {
	t.Helper()
	var spans []span
	require.Eventually(t, func() bool {
		spans = traces.trace(id)
		for _, e := range edges { // children and parents: a parent's span may be exported after its child's
			if _, ok := find(spans, e[0], e[1]); !ok {
				return false
			}
			if _, ok := find(spans, e[2], e[3]); !ok {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "trace %s never had all of %v; it has:\n%s", id, edges, spanList(traces.trace(id)))
	for _, e := range edges {
		child, _ := find(spans, e[0], e[1])
		parent, ok := find(spans, e[2], e[3])
		if assert.True(t, ok, "no %s %q in trace %s", e[2], e[3], id) {
			assert.Equal(t, parent.SpanID, child.Parent, "%s is a child of %s", child, parent)
		}
	}
	return spans
}

// requireNoOrphans asserts that every span of the trace but root has a parent the receiver
// got, in the same trace: nothing hangs off a span that was lost or belongs elsewhere.
func requireNoOrphans(t *testing.T, spans []span, root span) {
	t.Helper()
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	for _, s := range spans {
		if s.SpanID != root.SpanID {
			assert.True(t, ids[s.Parent], "orphan: %s", s)
		}
	}
}

func services(spans []span) []string {
	var out []string
	for _, s := range spans {
		if !slices.Contains(out, s.Service) {
			out = append(out, s.Service)
		}
	}
	slices.Sort(out)
	return out
}

func spanList(spans []span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	return b.String()
}

// placeTraced places an order of one unit of sku (payment window timeout, "": the SKU's) as a
// client whose request starts a trace: it sends a traceparent of a fresh trace id and a span
// id of its own, which no receiver gets (the client exports nothing), and returns them.
func placeTraced(c client, sku, timeout string) (orderID, traceID, clientSpan string) {
	c.t.Helper()
	traceID, clientSpan = randomHex(16), randomHex(8)
	buyer := "u-" + randomHex(3)
	body := map[string]any{"items": []item{{SKU: sku, Qty: 1}}, "currency": "CNY", "buyer_id": buyer}
	if timeout != "" {
		body["payment_timeout"] = timeout
	}
	status, resp := c.call("POST", sys.URLs["order"]+"/v1/orders", body, map[string]string{
		"Idempotency-Key": randomHex(8), "Authorization": "Bearer " + token(c.t, buyer, auth.Buyer),
		"traceparent": "00-" + traceID + "-" + clientSpan + "-01",
	})
	require.Equal(c.t, http.StatusCreated, status, "%v", resp)
	return resp["order_id"].(string), traceID, clientSpan
}

// process and send are the span names of a consumer (natsx) and of the outbox relay.
func process(subject string) string { return "process " + subject }
func send(subject string) string    { return "send " + subject }

// TestTraceFollowsAnOrderAcrossTheFourServices places one order as a client that starts a
// trace (its traceparent), pays it through the sandbox callback, and reads the spans the four
// service processes exported over OTLP:
//
//   - the order's trace: order's POST → order's relay sending order.created from the outbox
//     → (NATS) stock's order.created → stock's relay → timeout's stock.locked (the deadline),
//     and order's send → payment-adapter's order.created (the total it checks payments
//     against), every span's parent one of the trace's spans;
//   - the callback's trace: the provider's call carries no trace context of ours, so it is a
//     trace of its own, rooted at payment-adapter's server span, which links to the order's
//     trace (payment-adapter's order.created span); payment.succeeded → stock → stock.sold →
//     timeout (the deadline cancelled) and order follow in it, each through its sender's
//     relay, with no orphans either.
func TestTraceFollowsAnOrderAcrossTheFourServices(t *testing.T) {
	// order.created.<key> is named by its template in span names (events.SubjectTemplate).
	createdTemplate := events.SubjectOrderCreated + ".{key}"
	c := client{t}
	id, traceID, clientSpan := placeTraced(c, newSKU(t, c, 5), "")
	c.waitStatus(id, "awaiting_payment", 10*time.Second)

	orderTrace := requireEdges(t, traceID, [][4]string{
		{"order", send(createdTemplate), "order", "POST /v1/orders"}, // the relay, from the outbox row
		{"stock", process(createdTemplate), "order", send(createdTemplate)},
		{"stock", send(events.SubjectStockLocked), "stock", process(createdTemplate)},
		{"timeout", process(events.SubjectStockLocked), "stock", send(events.SubjectStockLocked)},
		{"payment-adapter", process(createdTemplate), "order", send(createdTemplate)},
	})
	root, _ := find(orderTrace, "order", "POST /v1/orders")
	assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, root.Kind)
	assert.Equal(t, clientSpan, root.Parent, "order's request span continues the client's traceparent")
	remembered, _ := find(orderTrace, "payment-adapter", process(createdTemplate))

	status, body := c.pay(id, 4900, "txn-"+id) // payment-adapter has the order: its span is in
	require.Equal(t, http.StatusOK, status, "%v", body)
	c.waitStatus(id, "paid", 10*time.Second)

	var callback span
	require.Eventually(t, func() bool {
		linked := traces.linkedTo(traceID)
		if len(linked) == 0 {
			return false
		}
		callback = linked[0]
		return true
	}, 30*time.Second, 50*time.Millisecond, "no span links to the order's trace")
	assert.Equal(t, "payment-adapter", callback.Service)
	assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, callback.Kind)
	assert.Empty(t, callback.Parent, "the provider's call starts a trace")
	assert.NotEqual(t, traceID, callback.TraceID)
	assert.Contains(t, callback.Links, link{TraceID: traceID, SpanID: remembered.SpanID, Why: events.SubjectOrderCreated},
		"the callback links to payment-adapter's order.created span in the order's trace")

	requireEdges(t, callback.TraceID, [][4]string{
		{"payment-adapter", send(events.SubjectPaymentSucceeded), "payment-adapter", "POST /v1/callbacks/{provider}"},
		{"stock", process(events.SubjectPaymentSucceeded), "payment-adapter", send(events.SubjectPaymentSucceeded)},
		{"stock", send(events.SubjectStockSold), "stock", process(events.SubjectPaymentSucceeded)},
		{"timeout", process(events.SubjectStockSold), "stock", send(events.SubjectStockSold)},
	})
	// Late spans of either trace (a consumer that handles the event last) have had their time.
	require.Eventually(t, func() bool {
		return slices.Contains(services(traces.trace(callback.TraceID)), "order")
	}, 30*time.Second, 50*time.Millisecond, "order never followed the payment")
	time.Sleep(time.Second)
	orderTrace, payTrace := traces.trace(traceID), traces.trace(callback.TraceID)
	assert.Equal(t, []string{"order", "payment-adapter", "stock", "timeout"}, services(orderTrace), "spans:\n%s", spanList(orderTrace))
	assert.Equal(t, []string{"order", "payment-adapter", "stock", "timeout"}, services(payTrace), "spans:\n%s", spanList(payTrace))
	requireNoOrphans(t, orderTrace, root)
	requireNoOrphans(t, payTrace, callback)
	t.Logf("order trace %s:\n%s", traceID, spanList(orderTrace))
	t.Logf("callback trace %s:\n%s", callback.TraceID, spanList(payTrace))
	traces.mu.Lock()
	defer traces.mu.Unlock()
	assert.Zero(t, traces.failed, "every export decoded")
}

// TestTraceFollowsAnUnpaidOrderToItsExpiry: an order left unpaid expires in its own trace,
// whichever of timeout's paths expires it — the fired schedule message (its headers carry the
// trace) or the sweeper (the deadline row keeps it): stock's timeout.expired hangs off a
// timeout span of the order's trace, order's stock.released off it, and nothing is orphaned.
func TestTraceFollowsAnUnpaidOrderToItsExpiry(t *testing.T) {
	c := client{t}
	id, traceID, clientSpan := placeTraced(c, newSKU(t, c, 5), "2s")
	c.waitStatus(id, "closed", 15*time.Second)

	spans := requireEdges(t, traceID, [][4]string{
		{"timeout", process(events.SubjectStockLocked), "stock", send(events.SubjectStockLocked)},
		{"stock", process(events.SubjectTimeoutExpired), "timeout", send(events.SubjectTimeoutExpired)},
		{"stock", send(events.SubjectStockReleased), "stock", process(events.SubjectTimeoutExpired)},
		{"order", process(events.SubjectStockReleased), "stock", send(events.SubjectStockReleased)},
	})
	expired, _ := find(spans, "timeout", send(events.SubjectTimeoutExpired))
	i := slices.IndexFunc(spans, func(s span) bool { return s.SpanID == expired.Parent })
	require.GreaterOrEqual(t, i, 0, "the parent of %s is in the trace:\n%s", expired, spanList(spans))
	assert.Equal(t, "timeout", spans[i].Service, "timeout expired the order (fire or sweep): %s", spans[i])
	time.Sleep(time.Second) // late spans: order's request span is in no edge above, so it may come last
	spans = traces.trace(traceID)
	root, ok := find(spans, "order", "POST /v1/orders")
	require.True(t, ok, "order's request span:\n%s", spanList(spans))
	assert.Equal(t, clientSpan, root.Parent)
	requireNoOrphans(t, spans, root)
	t.Logf("trace %s:\n%s", traceID, spanList(spans))
}
