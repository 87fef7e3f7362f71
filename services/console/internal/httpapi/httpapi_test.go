package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stockflow/stockflow/services/console/internal/live"
)

// upstream answers every request with what it received, as a service's echo would.
func upstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"unauthenticated","message":"no token"}}`)
			return
		}
		if r.URL.Path == "/v1/skus/NOPE" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"sku_not_found","message":"no such SKU"}}`)
			return
		}
		if r.Method == http.MethodGet && strings.Count(r.URL.Path, "/") == 3 && strings.HasPrefix(r.URL.Path, "/v1/skus/") {
			_, _ = io.WriteString(w, `{"sku":"CUP-1","on_hand":10,"available":7,"locked":1,"sold":2}`)
			return
		}
		if len(body) == 0 {
			body = []byte("null")
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery,
			"key": r.Header.Get("Idempotency-Key"), "body": json.RawMessage(body)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func console(t *testing.T) *httptest.Server { return consoleWith(t, "") }

func consoleWith(t *testing.T, compareReport string) *httptest.Server {
	up := upstream(t)
	client := &http.Client{Timeout: 5 * time.Second}
	services := map[string]string{"stock": up.URL, "order": up.URL}
	hub := live.New(StockFetch(client, up.URL), 50*time.Millisecond)
	srv := httptest.NewServer(Handler(services, client, hub, compareReport, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyForwardsTheCallersTokenAndNothingInternal(t *testing.T) {
	srv := console(t)
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		contains                        string
	}{
		{"a read with the caller's token", "GET", "/api/stock/v1/skus/CUP-1/ledger?after=5&limit=10", "good", "", 200, `"query":"after=5\u0026limit=10"`},
		{"a write keeps its body and idempotency key", "POST", "/api/stock/v1/skus/CUP-1/purchases", "good", `{"qty":5}`, 200, `"body":{"qty":5},"key":"k1"`},
		{"the service's refusal is passed on", "GET", "/api/stock/v1/skus/CUP-1", "bad", "", 401, "unauthenticated"},
		{"internal routes are not forwarded", "POST", "/api/stock/v1/internal/locks", "good", "{}", 404, "not_proxied"},
		{"callbacks are not forwarded", "POST", "/api/order/v1/callbacks/sandbox", "good", "{}", 404, "not_proxied"},
		{"an unknown service", "GET", "/api/billing/v1/x", "good", "", 404, "unknown_service"},
		{"an unknown console route", "GET", "/api/nothing", "good", "", 404, "not_found"},
		{"PATCH is not forwarded", "PATCH", "/api/stock/v1/skus/CUP-1", "good", "", 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(t, tc.method, srv.URL+tc.path, tc.token, tc.body)
			if status != tc.status || !strings.Contains(body, tc.contains) {
				t.Fatalf("%s %s: %d %s; want %d with %q", tc.method, tc.path, status, body, tc.status, tc.contains)
			}
		})
	}
}

func TestTheAppIsServedFromTheBinaryWithAStrictPolicy(t *testing.T) {
	srv := console(t)
	for _, path := range []string{"/", "/app.js", "/app.css"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Fatalf("%s: CSP %q", path, csp)
		}
		if strings.Contains(string(b), "http://") || strings.Contains(string(b), "https://") {
			if path != "/app.js" { // app.js names the SVG namespace, not a resource
				t.Fatalf("%s loads something from another origin", path)
			}
		}
	}
}

func TestLiveStreamsSamplesAndRefusesWhatStockRefuses(t *testing.T) {
	srv := console(t)
	if status, body := do(t, "GET", srv.URL+"/api/live/CUP-1", "", ""); status != 401 || !strings.Contains(body, "sign in") {
		t.Fatalf("no token: %d %s", status, body)
	}
	if status, body := do(t, "GET", srv.URL+"/api/live/CUP-1", "bad", ""); status != 401 || !strings.Contains(body, "unauthenticated") {
		t.Fatalf("bad token: %d %s", status, body)
	}
	if status, body := do(t, "GET", srv.URL+"/api/live/NOPE", "good", ""); status != 404 || !strings.Contains(body, "sku_not_found") {
		t.Fatalf("unknown SKU: %d %s", status, body)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/live/CUP-1", nil)
	req.Header.Set("Authorization", "Bearer good")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	buf := make([]byte, 0, 4096)
	deadline := time.Now().Add(3 * time.Second)
	for strings.Count(string(buf), "event: sample") < 3 && time.Now().Before(deadline) {
		chunk := make([]byte, 1024)
		n, err := resp.Body.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			break
		}
	}
	if got := strings.Count(string(buf), "event: sample"); got < 3 || !strings.Contains(string(buf), `"available":7`) {
		t.Fatalf("stream: %q", buf)
	}
}

func TestCompareServesTheReportToAReaderStockAccepts(t *testing.T) {
	dir := t.TempDir()
	report := dir + "/compare.json"
	srv := consoleWith(t, report)
	if status, body := do(t, "GET", srv.URL+"/api/compare", "", ""); status != 401 || !strings.Contains(body, "sign in") {
		t.Fatalf("no token: %d %s", status, body)
	}
	if status, body := do(t, "GET", srv.URL+"/api/compare", "bad", ""); status != 401 || !strings.Contains(body, "unauthenticated") {
		t.Fatalf("a token stock refuses: %d %s", status, body)
	}
	if status, body := do(t, "GET", srv.URL+"/api/compare", "good", ""); status != 404 || !strings.Contains(body, "no_compare_report") {
		t.Fatalf("before any run: %d %s", status, body)
	}
	if err := os.WriteFile(report, []byte(`{"done":false,"designs":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	if status, body := do(t, "GET", srv.URL+"/api/compare", "good", ""); status != 500 || !strings.Contains(body, "compare_report_invalid") {
		t.Fatalf("a torn report: %d %s", status, body)
	}
	if err := os.WriteFile(report, []byte(`{"done":true,"designs":[{"name":"stockflow"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if status, body := do(t, "GET", srv.URL+"/api/compare", "good", ""); status != 200 || !strings.Contains(body, `"name":"stockflow"`) {
		t.Fatalf("the report: %d %s", status, body)
	}
	if status, body := do(t, "GET", consoleWith(t, "").URL+"/api/compare", "good", ""); status != 404 || !strings.Contains(body, "compare_not_configured") {
		t.Fatalf("a console without a report: %d %s", status, body)
	}
}

func TestHealthzNamesTheBuild(t *testing.T) {
	status, body := do(t, "GET", console(t).URL+"/healthz", "", "")
	if status != 200 || !strings.Contains(body, `"status":"ok","version":"dev"`) {
		t.Fatalf("healthz: %d %s", status, body)
	}
}
