// Package httpapi is the console's HTTP surface: the embedded single-page app, a thin proxy
// from /api/{service}/v1/… to the services' public APIs that forwards the signed-in person's
// bearer token (every role check stays in the services), and /api/live/{sku}, the water level
// of a SKU as server-sent events.
package httpapi

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stockflow/stockflow/pkg/buildinfo"
	"github.com/stockflow/stockflow/services/console/internal/live"
)

//go:embed assets
var assets embed.FS

// maxBody bounds a request body the console forwards, as the services bound theirs.
const maxBody = 1 << 20

// Handler serves the console. services maps the /api/{service} names to base URLs; client
// calls them (its timeout bounds one call); hub feeds /api/live; compareReport is the file
// `stockflow compare` writes, served at /api/compare ("" when this console has none).
func Handler(services map[string]string, client *http.Client, hub *live.Hub, compareReport string, log *slog.Logger) http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded folder is part of the build
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, struct {
			Status string `json:"status"`
			buildinfo.Info
		}{"ok", buildinfo.Get()})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	p := proxy{services: services, client: client, log: log}
	mux.Handle("/api/{service}/v1/{path...}", p)
	mux.Handle("GET /api/live/{sku}", liveHandler{hub: hub, log: log})
	mux.Handle("GET /api/compare", compareHandler{report: compareReport, check: stockCheck(client, services["stock"])})
	mux.HandleFunc("/api/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such console API route")
	})
	files := http.FileServerFS(static)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "the console's pages are read-only")
			return
		}
		files.ServeHTTP(w, r)
	})
	return secure(mux)
}

// secure adds the headers that keep the page to its own origin: scripts and styles only from
// the console (no inline script, so an injected one does not run), no framing, no sniffing.
func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			w.Header().Set("Cache-Control", "no-cache")
		}
		h.ServeHTTP(w, r)
	})
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// proxy forwards /api/{service}/v1/{path} to the service's /v1/{path} with the caller's
// Authorization, Content-Type and Idempotency-Key. The services' internal routes (meant for
// service tokens) and the providers' callbacks are not forwarded: a person has no business
// there through the console.
type proxy struct {
	services map[string]string
	client   *http.Client
	log      *slog.Logger
}

var forwarded = []string{"Authorization", "Content-Type", "Idempotency-Key", "Accept"}

func (p proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	svc, path := r.PathValue("service"), r.PathValue("path")
	base, ok := p.services[svc]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_service", fmt.Sprintf("no service %q (order, stock, payment-adapter, timeout)", svc))
		return
	}
	if strings.HasPrefix(path, "internal/") || strings.HasPrefix(path, "callbacks/") {
		writeError(w, http.StatusNotFound, "not_proxied", "the console does not forward the services' internal routes or payment callbacks")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not forwarded")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over 1 MiB")
		return
	}
	target := base + "/v1/" + (&url.URL{Path: path}).EscapedPath()
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target, bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	for _, h := range forwarded {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		p.log.WarnContext(r.Context(), "upstream call failed", "service", svc, "path", path, "err", err)
		writeError(w, http.StatusBadGateway, "upstream_unavailable", fmt.Sprintf("%s did not answer: %v", svc, err))
		return
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		p.log.WarnContext(r.Context(), "copy upstream answer", "service", svc, "err", err)
	}
}

// StatusError is a service's non-2xx answer to a read the console made itself.
type StatusError struct {
	Status int
	Body   []byte
}

func (e *StatusError) Error() string {
	var b errorBody
	if json.Unmarshal(e.Body, &b) == nil && b.Error.Code != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, b.Error.Code, b.Error.Message)
	}
	return fmt.Sprintf("status %d", e.Status)
}

// StockFetch reads a SKU's figures from stock's GET /v1/skus/{sku} with the given token.
func StockFetch(client *http.Client, stockURL string) live.Fetch {
	return func(ctx context.Context, sku, token string) (live.Sample, error) {
		raw, err := read(ctx, client, stockURL+"/v1/skus/"+url.PathEscape(sku), token)
		if err != nil {
			return live.Sample{}, fmt.Errorf("read %s: %w", sku, err)
		}
		var s live.Sample
		if err := json.Unmarshal(raw, &s); err != nil {
			return live.Sample{}, fmt.Errorf("read %s: %w", sku, err)
		}
		return s, nil
	}
}

// read GETs target with the caller's Authorization and returns the body of a 200 answer; any
// other answer is a *StatusError carrying the service's own body.
func read(ctx context.Context, client *http.Client, target, token string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Status: resp.StatusCode, Body: raw}
	}
	return raw, nil
}

// liveHandler streams a SKU's samples as server-sent events ("event: sample"). The watcher's
// own token is checked first with one read of its own, so a token stock refuses, or an unknown
// SKU, is an ordinary JSON error and no stream.
type liveHandler struct {
	hub *live.Hub
	log *slog.Logger
}

func (h liveHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sku, token := r.PathValue("sku"), r.Header.Get("Authorization")
	if token == "" {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "sign in first: the live view needs your bearer token")
		return
	}
	first, err := h.hub.Read(r.Context(), sku, token)
	if err != nil {
		writeUpstreamError(w, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "no_streaming", "this server cannot stream")
		return
	}
	// The stream outlives the server's write timeout: lift it for this response only.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	watcher := h.hub.Watch(sku, token)
	defer h.hub.Leave(watcher)
	send := func(s live.Sample) bool {
		b, _ := json.Marshal(s)
		if _, err := fmt.Fprintf(w, "event: sample\ndata: %s\n\n", b); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	first.At = time.Now()
	if !send(first) {
		return
	}
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case s, ok := <-watcher.C:
			if !ok || !send(s) {
				return
			}
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
