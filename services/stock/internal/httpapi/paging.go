package httpapi

import (
	"net/url"
	"strconv"
)

// Lists page the same way: limit= (1..maxLimit, default defaultLimit) and a cursor of the
// list's own (after=, before=) that the previous page answered; that answer is left out on
// the last page. A store reads limit+1 rows, so the last page is known without another query.

const defaultLimit, maxLimit = 100, 1000

func decodeLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, codeInvalidLimit.Errorf("limit must be between 1 and %d", maxLimit)
	}
	return n, nil
}

// decodeIDCursor reads the id cursor name (0 when absent): a non-negative integer, else
// invalid_cursor.
func decodeIDCursor(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 0 {
		return 0, codeInvalidCursor.Errorf("%s must be a non-negative id, as the previous page answered", name)
	}
	return id, nil
}

// page returns the views of items, read with limit+1, cut to limit, and the cursor of the
// next page from the last one kept: the zero K on the last page. The views are never nil, so
// an empty page is [] in JSON (and a failed read's page, which nobody sees, is empty).
func page[T, V any, K comparable](items []T, limit int, view func(T) V, cursor func(T) K) ([]V, K) {
	var next K
	if len(items) > limit {
		items = items[:limit]
		next = cursor(items[limit-1])
	}
	out := make([]V, len(items))
	for i, it := range items {
		out[i] = view(it)
	}
	return out, next
}
