// Replicas: with Options.Replicas > 1 (`make up REPLICAS=2`) every service runs as several
// processes against the same databases and streams, as a Deployment of that many pods would,
// and a round-robin front on the service's usual address stands in for the Kubernetes
// Service in front of them.

package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// ReplicaName is the process name of a service's nth replica: the service's own name for the
// first (so its pid file, log and supervisor record are a single process's), "<svc>-<n>" for
// the others ("stock-2": .run/pids/stock-2.pid, .run/logs/stock-2.log).
func ReplicaName(svc string, n int) string {
	if n <= 1 {
		return svc
	}
	return svc + "-" + strconv.Itoa(n)
}

// replicaOf splits a process name into its service and replica number; ok is false for a name
// that is neither a service nor a replica of one.
func replicaOf(name string) (svc string, n int, ok bool) {
	for _, svc := range Services {
		if name == svc {
			return svc, 1, true
		}
		if rest, found := strings.CutPrefix(name, svc+"-"); found {
			if n, err := strconv.Atoi(rest); err == nil && ReplicaName(svc, n) == name && n >= 2 {
				return svc, n, true
			}
		}
	}
	return "", 0, false
}

// replicaNames are the process names of n replicas of svc, first to last.
func replicaNames(svc string, n int) []string {
	names := make([]string, max(n, 1))
	for i := range names {
		names[i] = ReplicaName(svc, i+1)
	}
	return names
}

// Replicas are the process names of svc's replicas, first to last: just svc with one.
func (s *System) Replicas(svc string) []string { return replicaNames(svc, s.opts.Replicas) }

// processes are every service process, each service's replicas in turn. Replicas starting
// together on a fresh database are safe: pkg/postgres creates it once and migrates under an
// advisory lock.
func (s *System) processes() []string {
	var names []string
	for _, svc := range Services {
		names = append(names, s.Replicas(svc)...)
	}
	return names
}

// ProcessURL is where a service process (a service's name: its first replica; or "stock-2")
// answers itself, past the front: with one replica, the service's URL.
func (s *System) ProcessURL(name string) string { return s.procURLs[name] }

// reserveProcess fixes the URL of process name: the service's own with one replica; with
// several, a port of its own (Options.ReplicaPorts, else a free one), kept across restarts.
func (s *System) reserveProcess(name string) error {
	svc, n, ok := replicaOf(name)
	if !ok || n > max(s.opts.Replicas, 1) {
		return fmt.Errorf("no service process %q (services: %s; %d replicas each)", name, strings.Join(Services, ", "), max(s.opts.Replicas, 1))
	}
	if err := s.reserve(svc); err != nil {
		return err
	}
	if _, ok := s.procURLs[name]; ok {
		return nil
	}
	if s.opts.Replicas <= 1 {
		s.procURLs[name] = s.URLs[svc]
		return nil
	}
	u, err := localURL(s.opts.ReplicaPorts[name])
	if err == nil {
		s.procURLs[name] = u
	}
	return err
}

// ensureFront starts svc's front on the service's URL unless it runs, with every replica's
// URL reserved.
func (s *System) ensureFront(svc string) error {
	if s.opts.Replicas <= 1 || s.fronts[svc] != nil {
		return nil
	}
	var targets []*url.URL
	for _, name := range s.Replicas(svc) {
		if err := s.reserveProcess(name); err != nil {
			return err
		}
		u, err := url.Parse(s.procURLs[name])
		if err != nil {
			return err
		}
		targets = append(targets, u)
	}
	addr := strings.TrimPrefix(s.URLs[svc], "http://")
	if err := portFree(addr, 5*time.Second); err != nil {
		return fmt.Errorf("front of %s: %s is taken (is stockflow already up? `make down`, or free the port): %w", svc, addr, err)
	}
	f, err := startFront(svc, addr, targets, s.opts.Log)
	if err != nil {
		return err
	}
	s.fronts[svc] = f
	return nil
}

// closeFronts stops every front, letting requests in flight finish (up to 10 s).
func (s *System) closeFronts() error {
	var errs []error
	for svc, f := range s.fronts {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := f.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("front of %s: %w", svc, err))
		}
		cancel()
		delete(s.fronts, svc)
	}
	return errors.Join(errs...)
}

// front is a service's round-robin reverse proxy: each request goes to the next replica in
// turn. A replica that refuses the connection (down, or restarting) is skipped: the request
// goes to the next one, as a Service stops routing to a pod that is gone. A request that
// reached a replica and failed there is sent again only when it is idempotent (a safe method,
// or one carrying an Idempotency-Key: net/http's own rule for retrying); otherwise the caller
// gets 502, since the replica may have acted on it.
type front struct {
	svc     string
	addr    string // where it listens
	targets []*url.URL
	next    atomic.Uint64
	proxy   *httputil.ReverseProxy
	srv     *http.Server
	logf    func(format string, args ...any)
}

// attempt is one try of a request against one replica; the proxy's ErrorHandler fills err.
type attempt struct {
	target *url.URL
	body   func() io.ReadCloser // the request body, afresh; nil when it cannot be read again
	err    error
}

type attemptKey struct{}

// frontBuffer is the most of a request body the front keeps to send it again; the services
// refuse larger bodies anyway (pkg/httpx.MaxBody is 1 MiB).
const frontBuffer = 1<<20 + 1

func startFront(svc, addr string, targets []*url.URL, logf func(string, ...any)) (*front, error) {
	f := &front{svc: svc, targets: targets, logf: logf}
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256, // the flash sale's and loadtest's concurrency, kept alive
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			a := pr.In.Context().Value(attemptKey{}).(*attempt)
			pr.SetURL(a.target)
			pr.Out.Host = pr.In.Host
			if a.body != nil { // lets the Transport resend it on a kept-alive connection the replica had closed unused
				pr.Out.GetBody = func() (io.ReadCloser, error) { return a.body(), nil }
			}
		},
		Transport: transport,
		ErrorHandler: func(_ http.ResponseWriter, r *http.Request, err error) {
			r.Context().Value(attemptKey{}).(*attempt).err = err // ServeHTTP decides: next replica or 502
		},
		ErrorLog: log.New(logWriter(logf), "front "+svc+": ", 0),
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("front of %s: %w", svc, err)
	}
	f.addr = l.Addr().String()
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: f.proxy.ErrorLog}
	go func() {
		if err := f.srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			logf("front of %s stopped: %v", svc, err)
		}
	}()
	return f, nil
}

// ServeHTTP sends r to the next replica in turn, then to the others while the rule in front's
// comment allows, and answers 502 when none answered.
func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, whole, err := bufferBody(r)
	if err != nil {
		http.Error(w, "front of "+f.svc+": read request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	first := f.next.Add(1)
	var failed []string
	for i := range len(f.targets) {
		a := &attempt{target: f.targets[(first+uint64(i))%uint64(len(f.targets))]}
		if whole {
			a.body = body
		}
		req := r.WithContext(context.WithValue(r.Context(), attemptKey{}, a))
		req.Body = body()
		f.proxy.ServeHTTP(w, req)
		if a.err == nil {
			return
		}
		failed = append(failed, a.target.Host+": "+a.err.Error())
		if r.Context().Err() != nil || !whole || !(notConnected(a.err) || idempotent(r)) {
			break
		}
	}
	f.logf("front of %s: %s %s failed: %s", f.svc, r.Method, r.URL.Path, strings.Join(failed, "; "))
	http.Error(w, "front of "+f.svc+": no replica answered: "+strings.Join(failed, "; "), http.StatusBadGateway)
}

// bufferBody reads r's body (up to frontBuffer) so it can be sent to another replica; body
// returns a fresh reader of it for each attempt. whole is false when the body was larger: it
// is then sent once, never again.
func bufferBody(r *http.Request) (body func() io.ReadCloser, whole bool, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return func() io.ReadCloser { return http.NoBody }, true, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, frontBuffer))
	if err != nil {
		return nil, false, err
	}
	if len(buf) < frontBuffer {
		return func() io.ReadCloser { return io.NopCloser(bytes.NewReader(buf)) }, true, nil
	}
	rest := io.MultiReader(bytes.NewReader(buf), r.Body)
	return func() io.ReadCloser { return io.NopCloser(rest) }, false, nil
}

// notConnected reports whether err is a failure to connect: the request never reached the
// replica, so sending it to another cannot do it twice.
func notConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// idempotent reports whether r may be sent twice: a safe method, or an Idempotency-Key the
// service deduplicates on (the rule net/http's Transport retries by).
func idempotent(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return r.Header.Get("Idempotency-Key") != "" || r.Header.Get("X-Idempotency-Key") != ""
}

// logWriter sends a log.Logger's lines to the launcher's log.
type logWriter func(format string, args ...any)

func (l logWriter) Write(p []byte) (int, error) {
	l("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// portOf is the port of an http://host:port URL.
func portOf(u string) int {
	port, _ := strconv.Atoi(u[strings.LastIndex(u, ":")+1:])
	return port
}
