package httpx

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	errGone    = errors.New("gone")
	errSecret  = errors.New("invalid signature")
	errLimited = errors.New("rate limited")
	errDriver  = errors.New("driver: out of range")
)

var testTable = Table{Rules: []Rule{
	{Err: errGone, Code: NewCode(http.StatusNotFound, "gone"), Message: FromSentinel},
	{Err: errSecret, Code: NewCode(http.StatusUnauthorized, "invalid_signature"), Message: SentinelOnly},
	{Err: errLimited, Code: NewCode(http.StatusTooManyRequests, "rate_limited"), Header: func(error) http.Header {
		return http.Header{"Retry-After": {"2"}}
	}},
	{Match: func(err error) bool { return errors.Is(err, errDriver) }, Code: NewCode(http.StatusUnprocessableEntity, "overflow"), Message: Text("would overflow")},
}}

func TestTableMapsErrorsToTheirCodes(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		want   *Error
		header string // Retry-After
	}{
		{"a sentinel's message from the sentinel on", fmt.Errorf("get x: %w: id 7", errGone), &Error{Status: 404, Code: "gone", Message: "gone: id 7"}, ""},
		{"a secret's message says only the sentinel", fmt.Errorf("verify: %w: hmac mismatch", errSecret), &Error{Status: 401, Code: "invalid_signature", Message: "invalid signature"}, ""},
		{"the default message is the whole text", fmt.Errorf("place: %w", errLimited), &Error{Status: 429, Code: "rate_limited", Message: "place: rate limited"}, "2"},
		{"a matcher for errors without a sentinel", fmt.Errorf("insert: %w", errDriver), &Error{Status: 422, Code: "overflow", Message: "would overflow"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := testTable.Map(c.err)
			require.NotNil(t, got)
			assert.Equal(t, c.want.Status, got.Status)
			assert.Equal(t, c.want.Code, got.Code)
			assert.Equal(t, c.want.Message, got.Message)
			assert.Equal(t, c.header, got.Header.Get("Retry-After"))
		})
	}
}

func TestTableErrorPassesHTTPErrorsAndHidesTheRest(t *testing.T) {
	own := NewCode(http.StatusBadRequest, "invalid_cursor").Errorf("after must be a ledger id")
	assert.Same(t, own, testTable.Error(fmt.Errorf("decode: %w", own)), "an *Error passes through")
	assert.Nil(t, testTable.Map(errors.New("boom")), "no rule, no mapping")
	internal := testTable.Error(errors.New("connection reset"))
	assert.Equal(t, &Error{Status: 500, Code: "internal", Message: "internal error"}, internal, "the cause stays in the logs")
}

func TestWriteErrorWritesTheHeadersAndTheBody(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, testTable.Map(errLimited))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "2", w.Header().Get("Retry-After"))
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"error":{"code":"rate_limited","message":"rate limited"}}`, w.Body.String())
}
