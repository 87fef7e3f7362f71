package httpx

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"
)

// Endpoint adapts a typed endpoint to go-kit's endpoint.Endpoint, so that endpoint bodies take
// their request type and never assert one out of an any. Paired with its decoder by Server, the
// assertion here cannot fail; a request of another type is a wiring bug, answered 500.
func Endpoint[Req, Resp any](f func(context.Context, Req) (Resp, error)) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req, ok := request.(Req)
		if !ok && request != nil { // nil: the zero of an interface or pointer Req
			return nil, fmt.Errorf("endpoint takes %T, the decoder gave %T", req, request)
		}
		resp, err := f(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// Decoder adapts a typed request decoder to go-kit's kithttp.DecodeRequestFunc.
func Decoder[Req any](f func(context.Context, *http.Request) (Req, error)) kithttp.DecodeRequestFunc {
	return func(ctx context.Context, r *http.Request) (any, error) {
		req, err := f(ctx, r)
		if err != nil {
			return nil, err
		}
		return req, nil
	}
}

// NoRequest is the decoder of an endpoint that takes nothing from the request.
func NoRequest(context.Context, *http.Request) (struct{}, error) { return struct{}{}, nil }

// Transport is what every route of a service's API shares: its logger and its error table.
type Transport struct {
	Log    *slog.Logger
	Errors Table
}

// Server is the go-kit server of one route: dec's request is ep's, which the compiler checks,
// the response is written by EncodeJSON, and errors by t's table (ServerOptions).
func Server[Req, Resp any](t Transport, dec func(context.Context, *http.Request) (Req, error), ep func(context.Context, Req) (Resp, error)) *kithttp.Server {
	return kithttp.NewServer(Endpoint(ep), Decoder(dec), EncodeJSON, ServerOptions(t.Log, t.Errors.Map)...)
}
