package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/freeport"
)

// replica is a test server standing for one replica: it counts the requests that reach it
// and answers its name and the body it got, or, hanging up, drops the connection unanswered
// (a replica killed while it handled the request).
type replica struct {
	name   string
	hits   atomic.Int64
	hangUp bool
	url    *url.URL
}

func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.hits.Add(1)
	body, _ := io.ReadAll(req.Body)
	if r.hangUp {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	fmt.Fprintf(w, "%s:%s", r.name, body)
}

func newReplica(t *testing.T, name string, hangUp bool) *replica {
	r := &replica{name: name, hangUp: hangUp}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.url, _ = url.Parse(srv.URL)
	return r
}

// refusing is the URL of a replica that is down: nothing listens on its port.
func refusing(t *testing.T) *url.URL {
	port, err := freeport.Port()
	require.NoError(t, err)
	u, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port))
	return u
}

func frontOf(t *testing.T, targets ...*url.URL) string {
	f, err := startFront("svc", "127.0.0.1:0", targets, t.Logf)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.srv.Shutdown(context.Background()) })
	return "http://" + f.addr
}

// send makes one request through the front and returns its answer; header is name, value, ….
func send(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, errors.Join(err, resp.Body.Close()))
	return resp.StatusCode, string(answer)
}

func TestFrontTakesReplicasInTurnAndSkipsOneThatRefuses(t *testing.T) {
	a, b := newReplica(t, "a", false), newReplica(t, "b", false)
	url := frontOf(t, a.url, refusing(t), b.url)
	for i := range 9 {
		// A POST without a key too: refused, it never reached the replica, so the next may take it.
		status, body := send(t, "POST", url+"/v1/orders", fmt.Sprint("order ", i))
		require.Equal(t, http.StatusOK, status, body)
		assert.Regexp(t, fmt.Sprintf("^[ab]:order %d$", i), body, "the body reaches the replica whole, on the retry too")
	}
	assert.Equal(t, int64(9), a.hits.Load()+b.hits.Load(), "each request handled once")
	assert.Equal(t, int64(3), a.hits.Load(), "a in its turn")
	assert.Equal(t, int64(6), b.hits.Load(), "b in its turn and in the refusing one's")
}

func TestFrontSendsARequestThatReachedAReplicaAgainOnlyWhenIdempotent(t *testing.T) {
	for _, tc := range []struct {
		name         string
		method       string
		header       []string
		resent       bool
		wantStatus   int
		wantBodyPart string
	}{
		{"a POST is not sent twice", "POST", nil, false, http.StatusBadGateway, "no replica answered"},
		{"a POST with an Idempotency-Key is", "POST", []string{"Idempotency-Key", "k1"}, true, http.StatusOK, "ok:x"},
		{"a GET is", "GET", nil, true, http.StatusOK, "ok:x"},
		{"a PUT is not (net/http's rule: safe methods)", "PUT", nil, false, http.StatusBadGateway, "no replica answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dies, ok := newReplica(t, "dies", true), newReplica(t, "ok", false)
			url := frontOf(t, ok.url, dies.url) // the first request goes to the second target
			status, body := send(t, tc.method, url+"/x", "x", tc.header...)
			assert.Equal(t, tc.wantStatus, status)
			assert.Contains(t, body, tc.wantBodyPart)
			assert.Equal(t, int64(1), dies.hits.Load(), "it reached the replica that died")
			want := int64(0)
			if tc.resent {
				want = 1
			}
			assert.Equal(t, want, ok.hits.Load(), "sent to the other replica")
		})
	}
}

func TestReplicaNames(t *testing.T) {
	assert.Equal(t, []string{"payment-adapter", "payment-adapter-2"}, replicaNames("payment-adapter", 2))
	assert.Equal(t, []string{"stock"}, replicaNames("stock", 0))
	for name, want := range map[string]struct {
		svc string
		n   int
		ok  bool
	}{
		"stock": {"stock", 1, true}, "stock-2": {"stock", 2, true}, "payment-adapter-3": {"payment-adapter", 3, true},
		"payment-adapter": {"payment-adapter", 1, true},
		"stock-1":         {}, "stock-02": {}, "stock-x": {}, "paysim": {}, "redis-2": {},
	} {
		svc, n, ok := replicaOf(name)
		assert.Equal(t, want.ok, ok, name)
		assert.Equal(t, want.svc, svc, name)
		assert.Equal(t, want.n, n, name)
	}
}
