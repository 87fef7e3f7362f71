// Package httpx is the HTTP plumbing the services share: the JSON error body of the public
// contract and the error table each service declares once (errors.go), typed go-kit endpoints
// (endpoint.go), strict request decoding and the health endpoints.
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/stockflow/stockflow/pkg/buildinfo"
)

// MaxBody is the largest request body any endpoint accepts.
const MaxBody = 1 << 20

// DecodeJSON reads exactly one JSON object into dst: unknown fields, trailing data, bodies over
// MaxBody and malformed JSON are rejected with a 4xx *Error.
func DecodeJSON(r *http.Request, dst any) error {
	body, err := ReadBody(r)
	if err != nil {
		return err
	}
	return UnmarshalStrict(body, dst)
}

// ReadBody reads the raw request body, refusing more than MaxBody bytes.
func ReadBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, codeUnreadableBody.Errorf("read body: %v", err)
	}
	if len(body) > MaxBody {
		return nil, ErrBodyTooLarge
	}
	return body, nil
}

// UnmarshalStrict decodes one JSON object, refusing unknown fields and trailing data.
func UnmarshalStrict(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return codeMalformedJSON.Errorf("%v", err)
	}
	// Only white space may follow (dec.More alone misses a stray ']' or '}').
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return codeMalformedJSON.Errorf("trailing data after the JSON object")
	}
	return nil
}

// ServerOptions are the go-kit options every endpoint uses: errors become the JSON error body
// (err's own *Error, else mapErr's, else 500 internal), and a 5xx is logged.
func ServerOptions(log *slog.Logger, mapErr func(error) *Error) []kithttp.ServerOption {
	return []kithttp.ServerOption{
		kithttp.ServerErrorEncoder(func(ctx context.Context, err error, w http.ResponseWriter) {
			he := clientError(err, mapErr)
			if he.Status >= 500 {
				log.ErrorContext(ctx, "request failed", "err", err)
			}
			WriteError(w, he)
		}),
	}
}

// WriteError writes the contract's error body, {"error": {"code": …, "message": …}}, with
// e's headers.
func WriteError(w http.ResponseWriter, e *Error) {
	addHeaders(w, e.Header)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
}

// StatusCoder is implemented by responses that choose their own status (201 vs 200 on replay).
type StatusCoder interface{ StatusCode() int }

// Headerer is implemented by responses that carry headers (Location of a new resource).
type Headerer interface{ Headers() http.Header }

// EncodeJSON is a go-kit response encoder: the response as JSON, with its Headers() if it has
// them, and its StatusCode() if it has one, else 200.
func EncodeJSON(ctx context.Context, w http.ResponseWriter, resp any) error {
	if h, ok := resp.(Headerer); ok {
		addHeaders(w, h.Headers())
	}
	status := http.StatusOK
	if sc, ok := resp.(StatusCoder); ok {
		status = sc.StatusCode()
	}
	return JSON(status)(ctx, w, resp)
}

func addHeaders(w http.ResponseWriter, h http.Header) {
	for k, vs := range h {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
}

// JSON returns a go-kit response encoder writing the response as JSON with the given status.
func JSON(status int) kithttp.EncodeResponseFunc {
	return func(_ context.Context, w http.ResponseWriter, resp any) error {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		return json.NewEncoder(w).Encode(resp)
	}
}

// Health registers GET /healthz (the process runs; the body names the build, buildinfo) and
// GET /readyz (ready reports nil).
func Health(mux *http.ServeMux, ready func(context.Context) error) {
	healthy, _ := json.Marshal(struct {
		Status string `json:"status"`
		buildinfo.Info
	}{"ok", buildinfo.Get()})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(healthy)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context()); err != nil {
			WriteError(w, codeNotReady.Errorf("%v", err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ready"}`)
	})
}

// NotFound answers unknown routes with the contract's error body instead of text/plain.
func NotFound(mux *http.ServeMux) {
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		WriteError(w, codeRouteNotFound.Errorf("no such route"))
	})
}

// ErrorCode is the code of an error response's body in the contract's form (WriteError's
// {"error":{"code":…}}), or "" when body is not one.
func ErrorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// GetJSON fetches url with client and decodes a 200 response's JSON body into dst. It returns
// the status code and, for another status, the error code of the contract's error body ("" when
// the body is not one: a proxy's page, say). A status other than 200 is not an error (the
// caller decides what a 404 with which code means); a transport failure or an undecodable 200
// body is.
func GetJSON(ctx context.Context, client *http.Client, url string, dst any) (status int, code string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", fmt.Errorf("get %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("get %s: read body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ErrorCode(body), nil
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return resp.StatusCode, "", fmt.Errorf("get %s: decode: %w", url, err)
	}
	return resp.StatusCode, "", nil
}
