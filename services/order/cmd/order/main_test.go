package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/auth/authtest"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/pkg/natsx/natstest"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// getJSON GETs url, with the Authorization header bearer when it is not empty.
func getJSON(t *testing.T, url string, bearer ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for _, b := range bearer {
		req.Header.Set("Authorization", b)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body) // a non-JSON body leaves it nil: the caller asserts on it
	return resp.StatusCode, body
}

// TestServeEndToEnd runs the whole service — migrations on an empty database, NATS streams,
// outbox relay, consumers, HTTP — and follows one order through it.
func TestServeEndToEnd(t *testing.T) {
	_, dbURL := pgtest.New(t) // empty: serve migrates it (AUTO_MIGRATE defaults to true)
	natsURL := natstest.Start(t)
	addr := freeAddr(t)
	base := "http://" + addr
	kit := authtest.New(t)
	environ := []string{"DATABASE_URL=" + dbURL, "NATS_URL=" + natsURL, "HTTP_ADDR=" + addr,
		"AUTH_JWKS=" + kit.JWKSFile, "AUTH_ISSUER=" + authtest.Issuer, "AUTH_AUDIENCE=" + authtest.Audience}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, environ, io.Discard) }()
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		default:
		}
		code, _ := getJSON(t, base+"/readyz")
		return code == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond, "never ready")

	req, err := http.NewRequest(http.MethodPut, base+"/v1/prices/CUP-1", strings.NewReader(`{"unit_price":4900,"currency":"CNY"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", kit.Bearer("ops", auth.Operator))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "CUP-1 on sale")

	buyer := kit.Bearer("u1", auth.Buyer)
	req, err = http.NewRequest(http.MethodPost, base+"/v1/orders",
		strings.NewReader(`{"buyer_id":"u1","items":[{"sku":"CUP-1","qty":2,"unit_price":4900}],"currency":"CNY","payment_timeout":"10m"}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set("Authorization", buyer)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	var placed map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&placed))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%v", placed)
	id := placed["order_id"].(string)

	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	// The relay publishes order.created from the outbox.
	require.Eventually(t, func() bool {
		s, err := js.Stream(ctx, natsx.StreamOrder)
		if err != nil {
			return false
		}
		m, err := s.GetLastMsgForSubject(ctx, events.SubjectOrderCreated+".>")
		if err != nil {
			return false
		}
		_, ev, err := events.Decode[events.OrderCreated](m.Data)
		return err == nil && ev.OrderID == id
	}, 10*time.Second, 20*time.Millisecond, "order.created never published")

	// Stock answers; the consumer moves the order.
	m, err := events.Encode(events.StockLocked{OrderID: id, Lines: []events.Line{{SKU: "CUP-1", Qty: 2}}, PaymentDeadline: time.Now()}, time.Now())
	require.NoError(t, err)
	_, err = js.Publish(ctx, m.Subject, m.Data, jetstream.WithMsgID(m.ID))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, body := getJSON(t, base+"/v1/orders/"+id, buyer)
		return body["status"] == "awaiting_payment"
	}, 10*time.Second, 20*time.Millisecond, "order never followed stock.locked")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop")
	}
}

func TestRunRefusesBadConfigAndCommands(t *testing.T) {
	assert.ErrorContains(t, run(context.Background(), nil, []string{"ORDER_PAYMENT_WINDOW=0s"}, io.Discard), "ORDER_PAYMENT_WINDOW")
	_, dbURL := pgtest.New(t)
	assert.ErrorContains(t, run(context.Background(), []string{"dance"}, []string{"DATABASE_URL=" + dbURL}, io.Discard), "unknown command")
}

func TestMigrate(t *testing.T) {
	_, dbURL := pgtest.New(t)
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"migrate"}, []string{"DATABASE_URL=" + dbURL}, &out))
	assert.Contains(t, out.String(), "migrations applied")
}
