package service

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof starts Go's profiler on addr (Base.PprofAddr) and returns its server, to be shut
// down with the service. It listens on its own address, apart from the API: it needs no
// token, so it must never share the API's port.
func servePprof(addr string, log *slog.Logger) (*http.Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// A CPU profile or a trace takes as long as its ?seconds= asks: no write timeout.
	srv := &http.Server{Addr: lis.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof stopped", "err", err)
		}
	}()
	log.Info("pprof listening", "addr", srv.Addr)
	return srv, nil
}
