package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
)

// compareHandler serves the report `stockflow compare` keeps writing while it runs (the seed's
// three designs side by side), so the compare page can draw it as it moves. It is a local
// demonstration: a deployment leaves CONSOLE_COMPARE_REPORT unset and the page says how to run
// it. The reader's token is checked with a read of their own first, as the live view does.
type compareHandler struct {
	report string
	check  func(ctx context.Context, token string) error
}

func (h compareHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token := r.Header.Get("Authorization")
	if token == "" {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "sign in first: the compare report needs your bearer token")
		return
	}
	if err := h.check(r.Context(), token); err != nil {
		writeUpstreamError(w, err)
		return
	}
	if h.report == "" {
		writeError(w, http.StatusNotFound, "compare_not_configured", "this console has no compare report (CONSOLE_COMPARE_REPORT is unset): run `make compare` on a local system")
		return
	}
	raw, err := os.ReadFile(h.report)
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, "no_compare_report", "no compare has run yet: run `make compare` (with `make up` running)")
		return
	} else if err != nil {
		writeError(w, http.StatusInternalServerError, "compare_report_unreadable", err.Error())
		return
	}
	if !json.Valid(raw) {
		writeError(w, http.StatusInternalServerError, "compare_report_invalid", "the compare report is not JSON")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(raw)
}

// writeUpstreamError passes a service's refusal on as it came, and anything else as 502.
func writeUpstreamError(w http.ResponseWriter, err error) {
	if se := (*StatusError)(nil); errors.As(err, &se) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(se.Status)
		_, _ = w.Write(se.Body)
		return
	}
	writeError(w, http.StatusBadGateway, "upstream_unavailable", err.Error())
}

// stockCheck asks stock whether it accepts a token for reading: one page of one SKU.
func stockCheck(client *http.Client, stockURL string) func(ctx context.Context, token string) error {
	return func(ctx context.Context, token string) error {
		if _, err := read(ctx, client, stockURL+"/v1/skus?limit=1", token); err != nil {
			return fmt.Errorf("check the token with stock: %w", err)
		}
		return nil
	}
}
