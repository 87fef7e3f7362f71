package deadletter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/pkg/natsx"
)

// Mount returns h with the dead-letter admin API of a in front of it:
//
//	GET  /v1/admin/deadletters?consumer=&subject=&state=&limit=  newest first → {"dead_letters": […]}
//	GET  /v1/admin/deadletters/{seq}                              one, with headers and body
//	POST /v1/admin/deadletters/{seq}/replay                       run the consumer's handler on it
//
// state is pending (the default: no replay has succeeded), replayed or all; limit 1–500
// (default 50). Errors: 400 invalid_sequence, invalid_limit, invalid_state; 404
// dead_letter_not_found; 409 other_consumer (another service's consumer: ask that service),
// 409 not_replayable (a max-deliveries advisory, which carries no message); 422 replay_failed
// (the handler failed again; stored, and the dead letter stays pending).
//
// Who: listing and showing need the operator or admin role (bodies carry buyers' and payments'
// data, more than the reconcile summaries a viewer reads); a replay needs the admin role and
// records the token's subject as who replayed it.
func Mount(h http.Handler, a *Admin, log *slog.Logger, v *auth.Verifier) http.Handler {
	mux := http.NewServeMux()
	t := httpx.Transport{Log: log, Errors: errs}
	mux.Handle("GET /v1/admin/deadletters", v.Require(httpx.Server(t, decodeList, listEndpoint(a)), auth.Operator, auth.Admin))
	mux.Handle("GET /v1/admin/deadletters/{seq}", v.Require(httpx.Server(t, decodeSeq, showEndpoint(a)), auth.Operator, auth.Admin))
	mux.Handle("POST /v1/admin/deadletters/{seq}/replay", v.Require(httpx.Server(t, decodeSeq, replayEndpoint(a)), auth.Admin))
	mux.Handle("/", h)
	return mux
}

var (
	codeInvalidSequence = httpx.NewCode(http.StatusBadRequest, "invalid_sequence")
	codeInvalidLimit    = httpx.NewCode(http.StatusBadRequest, "invalid_limit")
	codeInvalidState    = httpx.NewCode(http.StatusBadRequest, "invalid_state")
)

// errs maps the Admin's errors to HTTP: the one place that does.
var errs = httpx.Table{Rules: []httpx.Rule{
	{Err: natsx.ErrDeadLetterNotFound, Code: httpx.NewCode(http.StatusNotFound, "dead_letter_not_found")},
	{Err: ErrOtherConsumer, Code: httpx.NewCode(http.StatusConflict, "other_consumer")},
	{Err: natsx.ErrNotReplayable, Code: httpx.NewCode(http.StatusConflict, "not_replayable"),
		Message: func(err, _ error) string {
			return err.Error() + "; redeliver the original from its stream instead"
		}},
	{Err: ErrReplayFailed, Code: httpx.NewCode(http.StatusUnprocessableEntity, "replay_failed"),
		Message: func(err, _ error) string {
			return err.Error() + "; the dead letter stays pending: fix the cause and replay it again"
		}},
}}

type listRequest struct{ q Query }

func decodeList(_ context.Context, r *http.Request) (listRequest, error) {
	v := r.URL.Query()
	req := listRequest{q: Query{Consumer: v.Get("consumer"), Subject: v.Get("subject"), State: StatePending, Limit: 50}}
	if s := v.Get("state"); s != "" {
		if s != StatePending && s != StateReplayed && s != StateAll {
			return req, codeInvalidState.Errorf("state must be pending, replayed or all")
		}
		req.q.State = s
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			return req, codeInvalidLimit.Errorf("limit must be between 1 and 500")
		}
		req.q.Limit = n
	}
	return req, nil
}

type seqRequest struct{ seq uint64 }

func decodeSeq(_ context.Context, r *http.Request) (seqRequest, error) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 63)
	if err != nil || seq == 0 {
		return seqRequest{}, codeInvalidSequence.Errorf("the sequence must be a DEADLETTER stream sequence: a whole number from 1")
	}
	return seqRequest{seq: seq}, nil
}

// ReplayView is one stored replay on the wire.
type ReplayView struct {
	At      time.Time `json:"at"`
	By      string    `json:"by"`
	Outcome string    `json:"outcome"`
	Error   string    `json:"error,omitempty"`
}

// View is a dead letter on the wire (the CLI decodes it too). The body is JSON when it is
// JSON (every stockflow event is), else base64 in body_base64; headers and body only when shown.
type View struct {
	Seq        uint64              `json:"seq"`
	Time       time.Time           `json:"time"`
	Kind       string              `json:"kind"`
	Subject    string              `json:"subject,omitempty"`
	Stream     string              `json:"stream"`
	StreamSeq  uint64              `json:"stream_seq"`
	Consumer   string              `json:"consumer"`
	Deliveries uint64              `json:"deliveries"`
	Reason     string              `json:"reason"`
	Error      string              `json:"error,omitempty"`
	Replayed   bool                `json:"replayed"`
	Replays    []ReplayView        `json:"replays"`
	Headers    map[string][]string `json:"headers,omitempty"`
	Body       json.RawMessage     `json:"body,omitempty"`
	BodyBase64 string              `json:"body_base64,omitempty"`
}

func view(e Entry, full bool) View {
	v := View{
		Seq: e.Seq, Time: e.Time.UTC(), Kind: e.Kind, Subject: e.Subject, Stream: e.Stream, StreamSeq: e.StreamSeq,
		Consumer: e.Consumer, Deliveries: e.Deliveries, Reason: e.Reason, Error: e.Error,
		Replayed: e.Replayed(), Replays: []ReplayView{},
	}
	for _, r := range e.Replays {
		v.Replays = append(v.Replays, ReplayView(r))
	}
	if full {
		v.Headers = e.Header
		if json.Valid(e.Data) {
			v.Body = e.Data
		} else if len(e.Data) > 0 {
			v.BodyBase64 = base64.StdEncoding.EncodeToString(e.Data)
		}
	}
	return v
}

// ListView is the body of GET /v1/admin/deadletters.
type ListView struct {
	DeadLetters []View   `json:"dead_letters"`
	Consumers   []string `json:"consumers"` // the service's consumers, whose dead letters these are
	Scanned     int      `json:"scanned"`
	Truncated   bool     `json:"truncated"`
}

func listEndpoint(a *Admin) func(context.Context, listRequest) (ListView, error) {
	return func(ctx context.Context, req listRequest) (ListView, error) {
		l, err := a.List(ctx, req.q)
		if err != nil {
			return ListView{}, err
		}
		out := ListView{DeadLetters: []View{}, Consumers: a.Consumers(), Scanned: l.Scanned, Truncated: l.Truncated}
		for _, e := range l.Entries {
			out.DeadLetters = append(out.DeadLetters, view(e, false))
		}
		return out, nil
	}
}

func showEndpoint(a *Admin) func(context.Context, seqRequest) (View, error) {
	return func(ctx context.Context, req seqRequest) (View, error) {
		e, err := a.Show(ctx, req.seq)
		if err != nil {
			return View{}, err
		}
		return view(e, true), nil
	}
}

// ReplayResultView is the body of POST /v1/admin/deadletters/{seq}/replay.
type ReplayResultView struct {
	DeadLetter      View `json:"dead_letter"`
	AlreadyReplayed bool `json:"already_replayed"`
}

func replayEndpoint(a *Admin) func(context.Context, seqRequest) (ReplayResultView, error) {
	return func(ctx context.Context, req seqRequest) (ReplayResultView, error) {
		res, err := a.Replay(ctx, req.seq, "api:"+auth.Actor(ctx))
		if err != nil {
			return ReplayResultView{}, err
		}
		return ReplayResultView{DeadLetter: view(res.Entry, false), AlreadyReplayed: res.AlreadyReplayed}, nil
	}
}
