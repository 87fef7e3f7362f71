package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// version and env describe the binary: they need no valid configuration and start nothing.
func TestVersionAndEnvNeedNoConfiguration(t *testing.T) {
	invalid := []string{"CONSOLE_ORDER_URL=not a url", "CONSOLE_LIVE_INTERVAL=1ms"}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, invalid, &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if got := out.String(); got != "console dev\n" {
			t.Errorf("%v printed %q, want the unstamped build %q", args, got, "console dev\n")
		}
	}

	var out bytes.Buffer
	if err := run(context.Background(), []string{"env"}, invalid, &out); err != nil {
		t.Fatalf("env: %v", err)
	}
	listing := out.String()
	for _, line := range []string{
		"HTTP_ADDR\tdefault=127.0.0.1:8085\n",
		"CONSOLE_ORDER_URL\tdefault=http://127.0.0.1:8081\n",
		"CONSOLE_STOCK_URL\tdefault=http://127.0.0.1:8082\n",
		"CONSOLE_PAYMENT_URL\tdefault=http://127.0.0.1:8083\n",
		"CONSOLE_TIMEOUT_URL\tdefault=http://127.0.0.1:8084\n",
		"LOG_LEVEL\tdefault=INFO\n",
		// a local demonstration's file: deployments give it no source
		"CONSOLE_COMPARE_REPORT\tunset\n",
	} {
		if !strings.Contains(listing, line) {
			t.Errorf("env lacks %q:\n%s", line, listing)
		}
	}
	if strings.Contains(listing, "\tsecret") {
		t.Errorf("the console holds no secret (decision 0007), yet env lists one:\n%s", listing)
	}
}

func TestUnknownCommandIsRefused(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"migrate"}, nil, &out)
	if err == nil || !strings.Contains(err.Error(), `unknown command "migrate"`) {
		t.Fatalf("run migrate: %v, want an unknown command", err)
	}
}
