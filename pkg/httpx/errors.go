package httpx

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Error is an error with its HTTP status, stable machine-readable code and any headers the
// answer carries (Retry-After on a 429). Services map their domain errors to an *Error in one
// place: the Table in their errors.go.
type Error struct {
	Status  int
	Code    string
	Message string
	Header  http.Header // written with the error body; nil: none
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Code is a stable machine-readable error code with the status it is answered with. A service
// names each of its codes once, in its errors.go, and builds its errors from the names.
type Code struct {
	Status int
	Name   string
}

// NewCode names a code.
func NewCode(status int, name string) Code { return Code{Status: status, Name: name} }

// Errorf builds an *Error of code c.
func (c Code) Errorf(format string, args ...any) *Error {
	return Errorf(c.Status, c.Name, format, args...)
}

// The codes of the request-shape errors every service shares.
var (
	codeMalformedJSON  = NewCode(http.StatusBadRequest, "malformed_json")
	codeUnreadableBody = NewCode(http.StatusBadRequest, "unreadable_body")
	codeNotReady       = NewCode(http.StatusServiceUnavailable, "not_ready")
	codeRouteNotFound  = NewCode(http.StatusNotFound, "route_not_found")
	codeInternal       = NewCode(http.StatusInternalServerError, "internal")
)

// The codes of the Idempotency-Key header, the same in every service that takes one: a
// request without a key, and one whose key is not acceptable (too long, not printable).
var (
	CodeMissingIdempotencyKey = NewCode(http.StatusBadRequest, "missing_idempotency_key")
	CodeInvalidIdempotencyKey = NewCode(http.StatusBadRequest, "invalid_idempotency_key")
)

// Common request errors, shared by every service.
var (
	ErrBodyTooLarge = &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", Message: "request body exceeds 1 MiB"}
	ErrNotFound     = &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such resource"}
)

// Rule maps the errors matching Err (errors.Is), or Match, to Code.
type Rule struct {
	Err   error
	Match func(error) bool // instead of Err, for errors without a sentinel (a driver's error code)
	Code  Code
	// Message is the text the client reads; nil: the Table's Message.
	Message Message
	// Header, if set, adds headers to the answer (Retry-After of a rate-limited request).
	Header func(error) http.Header
}

// Message says what a client reads of err, which matched sentinel (nil for a Match rule).
type Message func(err, sentinel error) string

// Whole is the whole of err's text, operation names included.
func Whole(err, _ error) string { return err.Error() }

// FromSentinel is the part of err from the sentinel on ("invalid transition: cannot ship an
// order that is pending"), without the operation names wrapped around it for the logs.
func FromSentinel(err, sentinel error) string {
	s := err.Error()
	if i := strings.Index(s, sentinel.Error()); i > 0 {
		return s[i:]
	}
	return s
}

// SentinelOnly is the sentinel's text and nothing more: what was wrong in detail is for the
// logs (an invalid signature does not say which check failed to a caller probing the scheme).
func SentinelOnly(_, sentinel error) string { return sentinel.Error() }

// Text is a fixed message.
func Text(s string) Message { return func(error, error) string { return s } }

// Table is a service's error table: every domain error its use cases return, with the status
// and stable code it is answered with. The first matching rule wins. Request-shape errors
// (malformed_json, body_too_large, unreadable_body) and codes built by the endpoints are
// *Error already and pass through.
type Table struct {
	Rules []Rule
	// Message is the text of rules that do not choose one; nil: Whole.
	Message Message
}

// Map returns err's *Error by the first rule that matches, or nil when none does.
func (t Table) Map(err error) *Error {
	for _, r := range t.Rules {
		if (r.Err == nil || !errors.Is(err, r.Err)) && (r.Match == nil || !r.Match(err)) {
			continue
		}
		msg := r.Message
		if msg == nil {
			msg = t.Message
		}
		if msg == nil {
			msg = Whole
		}
		he := &Error{Status: r.Code.Status, Code: r.Code.Name, Message: msg(err, r.Err)}
		if r.Header != nil {
			he.Header = r.Header(err)
		}
		return he
	}
	return nil
}

// Error is what a client gets for err: the *Error err holds, else the table's mapping, else
// 500 internal.
func (t Table) Error(err error) *Error { return clientError(err, t.Map) }

func clientError(err error, mapErr func(error) *Error) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	if mapErr != nil {
		if he := mapErr(err); he != nil {
			return he
		}
	}
	return codeInternal.Errorf("internal error")
}
