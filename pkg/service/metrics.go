package service

import "net/http"

// withMetrics serves GET /metrics (the Prometheus text of telemetry.SetupMetrics) in front of
// h: without a token, since Prometheus scrapes it from inside the cluster and the gateway never
// routes it (docs/security.md), and outside h's tracing, so a scrape every few seconds makes
// no spans and no HTTP request metric of its own.
func withMetrics(metrics, h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.Handle("/", h)
	return mux
}
