package httpapi

import (
	"net/http"

	"github.com/stockflow/stockflow/pkg/httpx"
	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

var codeDeadlineNotFound = httpx.NewCode(http.StatusNotFound, "deadline_not_found")

// errs maps the errors of the use cases to HTTP: the one place that does.
var errs = httpx.Table{Rules: []httpx.Rule{
	{Err: deadline.ErrNotFound, Code: codeDeadlineNotFound},
}}
