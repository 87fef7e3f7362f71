package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	const m = "github.com/stockflow/stockflow/"
	cases := []struct {
		name   string
		line   string
		broken int
	}{
		{"domain on std and events", m + "services/stock/internal/stock errors " + m + "pkg/events", 0},
		{"domain on its own domain", m + "services/order/internal/catalog " + m + "services/order/internal/order", 0},
		{"domain on pgx", m + "services/stock/internal/stock github.com/jackc/pgx/v5", 1},
		{"domain on its own adapter", m + "services/stock/internal/stock " + m + "services/stock/internal/postgres", 1},
		{"domain on shared infrastructure", m + "services/timeout/internal/deadline " + m + "pkg/natsx", 1},
		{"service on another service", m + "services/order/internal/reconcile " + m + "services/stock/internal/stock", 1},
		{"adapter on its domain", m + "services/stock/internal/postgres " + m + "services/stock/internal/stock github.com/jackc/pgx/v5", 0},
		{"use case on pgx", m + "services/stock/internal/app github.com/jackc/pgx/v5/pgxpool", 1},
		{"use case on a transport", m + "services/order/internal/app net/http github.com/go-kit/kit/endpoint", 1},
		{"use case on its own adapter", m + "services/stock/internal/app " + m + "services/stock/internal/postgres", 1},
		{"use case on its domain and pkg", m + "services/stock/internal/app " + m + "services/stock/internal/stock " + m + "pkg/outbox", 0},
		{"pkg on a service", m + "pkg/outbox " + m + "services/stock/internal/stock", 1},
		{"pkg on a tool", m + "pkg/natsx " + m + "tools/launcher", 1},
		{"tool on a service", m + "tools/flashsale " + m + "services/stock/internal/stock", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			assert.Equal(t, c.broken, check(strings.NewReader(c.line), &out), out.String())
		})
	}
}
