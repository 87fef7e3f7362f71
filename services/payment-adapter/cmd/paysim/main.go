// Command paysim is the payment providers' stand-in for local runs, the demo and the end-to-end
// tests: Stripe, WeChat Pay (API v3) and Alipay, each the test double its provider package is
// tested against (stripetest, wechatpaytest, alipaytest), speaking the provider's own API to
// the adapter (refunds, payment and refund queries) and signing callbacks exactly as the
// provider signs them, with keys of its own.
//
//	paysim -listen 127.0.0.1:18083 -callbacks http://127.0.0.1:8083 -env-file .run/paysim.env
//
// -env-file receives the adapter's settings for the three (PAYMENT_STRIPE_*,
// PAYMENT_WECHATPAY_*, PAYMENT_ALIPAY_*, keys as one-line PEM with \n written out) and
// PAYSIM_URL, written once it listens. Its control API plays the buyer and the provider's
// back office; {provider} is stripe, wechatpay or alipay:
//
//	POST /{provider}/payments          {order_id, amount, currency, outcome, deliver}
//	     a payment (outcome succeeded, the default, or failed) the provider now holds; its
//	     callback is POSTed to -callbacks/v1/callbacks/{provider} unless deliver is false (a
//	     lost callback, for the lost_callbacks job to find by query). Answers the callback it
//	     made and, when delivered, the adapter's answer.
//	POST /{provider}/sign              {body, at}  the callback body signed at time at (RFC 3339)
//	GET  /{provider}/refunds           the refunds the provider holds
//	POST /{provider}/refund-status     {status}   pending or succeeded: how new refunds start
//	POST /{provider}/refunds/{id}/complete {status, deliver}  a pending refund settled, and its
//	     notification sent
//	GET  /healthz
//
// It holds everything in memory: a restart is a new provider with new keys.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18083", "address of the control API")
	callbacks := flag.String("callbacks", "http://127.0.0.1:8083", "payment-adapter base URL callbacks are POSTed to")
	envFile := flag.String("env-file", "", "file to write the adapter's provider settings to (KEY=VALUE lines)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*listen, *callbacks, *envFile, log); err != nil {
		log.Error("paysim", "err", err)
		os.Exit(1)
	}
}

func run(listen, callbacks, envFile string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	sim, err := newSim(callbacks)
	if err != nil {
		return err
	}
	defer sim.Close()
	url := "http://" + l.Addr().String()
	if envFile != "" {
		if err := writeEnv(envFile, append(sim.Env(), "PAYSIM_URL="+url)); err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("paysim listening", "url", url, "callbacks", callbacks, "env_file", envFile)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// writeEnv writes lines to path atomically, readable by its owner only (it holds keys).
func writeEnv(path string, lines []string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".paysim-env-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := fmt.Fprintln(tmp, strings.Join(lines, "\n")); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
