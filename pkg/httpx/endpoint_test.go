package httpx

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type greetRequest struct{ Name string }

type greeting struct {
	Text string `json:"text"`
}

func (greeting) StatusCode() int      { return http.StatusCreated }
func (greeting) Headers() http.Header { return http.Header{"Location": {"/v1/greetings/1"}} }

func decodeGreet(_ context.Context, r *http.Request) (greetRequest, error) {
	var req greetRequest
	return req, DecodeJSON(r, &req)
}

func greet(_ context.Context, req greetRequest) (greeting, error) {
	if req.Name == "" {
		return greeting{}, NewCode(http.StatusUnprocessableEntity, "invalid_name").Errorf("name is required")
	}
	return greeting{Text: "hello " + req.Name}, nil
}

func TestServerRunsATypedEndpoint(t *testing.T) {
	srv := httptest.NewServer(Server(Transport{Log: slog.New(slog.DiscardHandler)}, decodeGreet, greet))
	t.Cleanup(srv.Close)
	cases := []struct {
		name, body string
		status     int
		want       string
		location   string
	}{
		{"the response's status, headers and body", `{"Name":"ada"}`, 201, `{"text":"hello ada"}`, "/v1/greetings/1"},
		{"an endpoint's error in the contract's body", `{}`, 422, `{"error":{"code":"invalid_name","message":"name is required"}}`, ""},
		{"a decoder's error in the contract's body", `{"Name":`, 400, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(c.body))
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, c.status, resp.StatusCode)
			assert.Equal(t, c.location, resp.Header.Get("Location"))
			if c.want != "" {
				assert.JSONEq(t, c.want, string(body))
			}
		})
	}
}

func TestEndpointRefusesARequestOfAnotherType(t *testing.T) {
	_, err := Endpoint(greet)(context.Background(), "not a greetRequest")
	require.Error(t, err)
	assert.Equal(t, http.StatusInternalServerError, Table{}.Error(err).Status, "a wiring bug, not the client's")
}

func TestEndpointTakesNilAsTheZeroRequest(t *testing.T) {
	got, err := Endpoint(func(_ context.Context, req *greetRequest) (bool, error) { return req == nil, nil })(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, true, got)
}

// One JSON object, then only white space: a stray closing bracket or brace after it is as
// malformed as a second value (review F23: dec.More alone let them through).
func TestUnmarshalStrictRefusesTrailingData(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"name":"x"}`:          true,
		"{\"name\":\"x\"} \n\t": true,
		`{"name":"x"}]`:         false,
		`{"name":"x"}}`:         false,
		`{"name":"x"} {}`:       false,
		`{"name":"x"},`:         false,
	} {
		var v fuzzTarget
		err := UnmarshalStrict([]byte(body), &v)
		if ok && err != nil {
			t.Errorf("%q: %v", body, err)
		}
		var he *Error
		if !ok && (!errors.As(err, &he) || he.Status != http.StatusBadRequest) {
			t.Errorf("%q: err = %v, want a 400 malformed_json", body, err)
		}
	}
}
