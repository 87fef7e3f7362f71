package httpapi

import (
	"errors"
	"net/http"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

// mapError maps the errors of the use cases to HTTP: the one place that does.
func mapError(err error) *httpx.Error {
	if errors.Is(err, deadline.ErrNotFound) {
		return &httpx.Error{Status: http.StatusNotFound, Code: "deadline_not_found", Message: err.Error()}
	}
	return nil
}
