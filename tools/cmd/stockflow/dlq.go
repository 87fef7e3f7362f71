package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/deadletter"
	"github.com/stockflow/stockflow/tools/launcher"
)

// dlqServices are the services whose dead letters dlq reads, in the order it asks them.
var dlqServices = []string{"order", "stock", "payment-adapter", "timeout"}

const dlqUsage = `usage: stockflow dlq list|show|replay [flags]
  list   [-service S|all] [-consumer NAME] [-subject SUBJ] [-state pending|replayed|all] [-limit N] [-json]
  show   [-service S|all] [-json] SEQ
  replay [-service S|all] [-json] SEQ
Each service answers for the dead letters of its own consumers (GET/POST /v1/admin/deadletters).
A replay runs the consumer's handler on the message through its inbox: replaying twice changes
nothing. Tokens come from the local identity provider (operator to read, admin to replay) unless
-token is given; -url addresses one service of another deployment.`

// dlqClient calls the dead-letter admin API of the services in urls.
type dlqClient struct {
	urls  map[string]string // service → base URL
	token func(admin bool) (string, error)
	http  *http.Client
}

// dlqError is a service's error answer.
type dlqError struct {
	Status  int
	Code    string
	Message string
}

func (e *dlqError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// call sends method path to svc and returns the JSON body of a 2xx answer, else a *dlqError.
func (c dlqClient) call(ctx context.Context, svc, method, path string, admin bool) (json.RawMessage, error) {
	tok, err := c.token(admin)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.urls[svc]+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (is it running? stockflow status)", svc, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", svc, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e) // a non-JSON answer keeps its status and raw text
		if e.Error.Code == "" {
			e.Error.Message = strings.TrimSpace(string(body))
		}
		return nil, &dlqError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return body, nil
}

// dlq is `stockflow dlq list|show|replay`.
func dlq(ctx context.Context, o launcher.Options, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || !slices.Contains([]string{"list", "show", "replay"}, args[0]) {
		fmt.Fprintln(stderr, dlqUsage)
		return flag.ErrHelp
	}
	sub := args[0]
	fs := flag.NewFlagSet("stockflow dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	service := fs.String("service", "all", "order, stock, payment-adapter, timeout, or all")
	baseURL := fs.String("url", "", "base URL of the one service to ask (another deployment); default: the local system's")
	token := fs.String("token", "", "bearer token; default: minted from the local identity provider (.run/auth)")
	asJSON := fs.Bool("json", false, "print the services' JSON answers")
	consumer := fs.String("consumer", "", "list: only this durable consumer's")
	subject := fs.String("subject", "", "list: only dead letters of this original subject")
	state := fs.String("state", "pending", "list: pending (no replay succeeded yet), replayed or all")
	limit := fs.Int("limit", 50, "list: at most this many per service, newest first")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	services := dlqServices
	if *service != "all" {
		if !slices.Contains(dlqServices, *service) {
			return fmt.Errorf("dlq: unknown service %q (%s or all)", *service, strings.Join(dlqServices, ", "))
		}
		services = []string{*service}
	}
	c := dlqClient{urls: map[string]string{}, http: &http.Client{Timeout: 70 * time.Second}}
	for _, svc := range services {
		c.urls[svc] = fmt.Sprintf("http://127.0.0.1:%d", o.Ports[svc])
	}
	if *baseURL != "" {
		if len(services) != 1 {
			return errors.New("dlq: -url needs -service naming the service it addresses")
		}
		c.urls[services[0]] = strings.TrimRight(*baseURL, "/")
	}
	c.token = func(admin bool) (string, error) {
		if *token != "" {
			return *token, nil
		}
		role := auth.Operator
		if admin {
			role = auth.Admin
		}
		return launcher.Token(o, "stockflow-dlq", []auth.Role{role}, 5*time.Minute)
	}

	if sub == "list" {
		if fs.NArg() > 0 {
			return fmt.Errorf("dlq list: unexpected arguments %q", fs.Args())
		}
		q := url.Values{"state": {*state}, "limit": {strconv.Itoa(*limit)}}
		if *consumer != "" {
			q.Set("consumer", *consumer)
		}
		if *subject != "" {
			q.Set("subject", *subject)
		}
		return dlqList(ctx, c, services, q, *consumer != "", *asJSON, stdout)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("dlq %s: give one DEADLETTER sequence (stockflow dlq list shows them)", sub)
	}
	seq, err := strconv.ParseUint(fs.Arg(0), 10, 63)
	if err != nil || seq == 0 {
		return fmt.Errorf("dlq %s: %q is not a DEADLETTER sequence", sub, fs.Arg(0))
	}
	return dlqOne(ctx, c, services, sub, seq, *asJSON, stdout)
}

// dlqList prints every asked service's dead letters, newest first within each service. With a
// consumer filter, the services that do not run it (409 other_consumer) are skipped.
func dlqList(ctx context.Context, c dlqClient, services []string, q url.Values, byConsumer, asJSON bool, stdout io.Writer) error {
	raw := map[string]json.RawMessage{}
	var rows [][]string
	var errs []error
	for _, svc := range services {
		body, err := c.call(ctx, svc, http.MethodGet, "/v1/admin/deadletters?"+q.Encode(), false)
		var de *dlqError
		if byConsumer && errors.As(err, &de) && de.Code == "other_consumer" && len(services) > 1 {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", svc, err))
			continue
		}
		raw[svc] = body
		var a deadletter.ListView
		if err := json.Unmarshal(body, &a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", svc, err))
			continue
		}
		for _, e := range a.DeadLetters {
			rows = append(rows, []string{svc, strconv.FormatUint(e.Seq, 10), e.Time.UTC().Format(time.RFC3339), e.Consumer,
				orDash(e.Subject), e.Reason, strconv.FormatUint(e.Deliveries, 10), replaysCell(e), shorten(e.Error, 60)})
		}
		if a.Truncated {
			errs = append(errs, fmt.Errorf("%s: DEADLETTER holds more than the newest 10000 messages it read", svc))
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(raw); err != nil {
			return err
		}
		return errors.Join(errs...)
	}
	if len(rows) == 0 {
		fmt.Fprintf(stdout, "no %s dead letters\n", q.Get("state"))
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVICE\tSEQ\tDEAD-LETTERED\tCONSUMER\tSUBJECT\tREASON\tDELIVERIES\tREPLAYS\tERROR")
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// dlqOne shows or replays dead letter seq. DEADLETTER is one stream, so each sequence belongs
// to one service's consumer; of several services asked, those answering 409 other_consumer are
// passed over (they neither show nor replay it).
func dlqOne(ctx context.Context, c dlqClient, services []string, sub string, seq uint64, asJSON bool, stdout io.Writer) error {
	method, path := http.MethodGet, fmt.Sprintf("/v1/admin/deadletters/%d", seq)
	if sub == "replay" {
		method, path = http.MethodPost, path+"/replay"
	}
	var unreachable []error
	for _, svc := range services {
		body, err := c.call(ctx, svc, method, path, sub == "replay")
		var de *dlqError
		if errors.As(err, &de) && de.Code == "other_consumer" && len(services) > 1 {
			continue
		}
		if err != nil && !errors.As(err, &de) && len(services) > 1 {
			unreachable = append(unreachable, err) // down: the dead letter may be another's
			continue
		}
		if err != nil {
			return fmt.Errorf("dlq %s %d: %s: %w", sub, seq, svc, err)
		}
		if asJSON {
			var out bytes.Buffer
			if err := json.Indent(&out, body, "", "  "); err != nil {
				return err
			}
			fmt.Fprintln(stdout, out.String())
			return nil
		}
		if sub == "replay" {
			var r deadletter.ReplayResultView
			if err := json.Unmarshal(body, &r); err != nil {
				return err
			}
			e := r.DeadLetter
			fmt.Fprintf(stdout, "%s: dead letter %d (%s, %s %s seq %d) replayed: done\n", svc, e.Seq, e.Consumer, e.Subject, e.Stream, e.StreamSeq)
			if r.AlreadyReplayed {
				fmt.Fprintln(stdout, "it had been replayed before: the inbox made this replay change nothing")
			}
			return nil
		}
		var e deadletter.View
		if err := json.Unmarshal(body, &e); err != nil {
			return err
		}
		return printDeadLetter(stdout, svc, e)
	}
	return fmt.Errorf("dlq %s %d: no consumer of %s wrote it: %w", sub, seq, strings.Join(services, ", "),
		errors.Join(append([]error{errors.New("ask the others with -service")}, unreachable...)...))
}

func printDeadLetter(w io.Writer, svc string, e deadletter.View) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range [][2]string{
		{"service", svc}, {"seq", strconv.FormatUint(e.Seq, 10)}, {"dead-lettered", e.Time.UTC().Format(time.RFC3339)},
		{"kind", e.Kind}, {"consumer", e.Consumer}, {"subject", orDash(e.Subject)},
		{"original", fmt.Sprintf("%s seq %d", e.Stream, e.StreamSeq)}, {"deliveries", strconv.FormatUint(e.Deliveries, 10)},
		{"reason", e.Reason}, {"error", orDash(e.Error)}, {"replays", replaysCell(e)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
	}
	for _, r := range e.Replays {
		fmt.Fprintf(tw, "  replay:\t%s by %s: %s %s\n", r.At.UTC().Format(time.RFC3339), r.By, r.Outcome, r.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "headers:")
	keys := make([]string, 0, len(e.Headers))
	for k := range e.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", k, strings.Join(e.Headers[k], ", "))
	}
	fmt.Fprintln(w, "body:")
	switch {
	case len(e.Body) > 0:
		var out bytes.Buffer
		if err := json.Indent(&out, e.Body, "  ", "  "); err != nil {
			return err
		}
		fmt.Fprintln(w, "  "+out.String())
	case e.BodyBase64 != "":
		fmt.Fprintln(w, "  (not JSON, base64) "+e.BodyBase64)
	default:
		fmt.Fprintln(w, "  (empty)")
	}
	return nil
}

// replaysCell is "0", or the count and whether one succeeded: "2 (done)", "1 (failed)".
func replaysCell(e deadletter.View) string {
	if len(e.Replays) == 0 {
		return "0"
	}
	state := "failed"
	if e.Replayed {
		state = "done"
	}
	return fmt.Sprintf("%d (%s)", len(e.Replays), state)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return orDash(s)
	}
	return s[:n-1] + "…"
}
