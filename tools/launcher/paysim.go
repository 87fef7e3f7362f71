package launcher

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// paysimPkg is the payment providers' stand-in (Stripe, WeChat Pay, Alipay), built with
// payment-adapter.
const paysimPkg = "./services/payment-adapter/cmd/paysim"

// ensurePaysim returns the base URL of this checkout's paysim and the adapter's environment
// for its three providers, starting it on o.PaysimPort with callbacks to adapterURL unless one
// of ours answers already (its keys are in its env file, .run/paysim.env, for as long as it
// runs). Locally every real provider is paysim's: `make up` needs no provider account.
func ensurePaysim(ctx context.Context, o Options, adapterURL string) (string, []string, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", o.PaysimPort)
	url, envFile := "http://"+addr, o.path("paysim.env")
	if pid := readPid(o.path("pids", "paysim.pid")); pid > 0 && Alive(pid) && answers(url+"/healthz") {
		if env, err := readEnvFile(envFile); err == nil {
			return url, env, nil // ours, from an earlier start
		}
		_ = syscall.Kill(pid, syscall.SIGKILL) // its env file is gone: start afresh
		waitGone(pid, 5*time.Second)
	}
	if err := portFree(addr, 5*time.Second); err != nil {
		return "", nil, fmt.Errorf("paysim's port %d is taken (another checkout's `make up`? run `make down` there, or set STOCKFLOW_PORT_OFFSET): %w", o.PaysimPort, err)
	}
	_ = os.Remove(envFile)
	exited, err := spawn(o, "paysim", exec.Command(o.path("bin", "paysim"), "-listen", addr, "-callbacks", adapterURL, "-env-file", envFile))
	if err != nil {
		return "", nil, err
	}
	deadline := time.Now().Add(20 * time.Second) // four RSA keys to generate
	for time.Now().Before(deadline) {
		if answers(url + "/healthz") {
			env, err := readEnvFile(envFile)
			return url, env, err
		}
		select {
		case <-ctx.Done():
			return "", nil, ctx.Err()
		case <-exited:
			return "", nil, fmt.Errorf("paysim exited during start; its log is %s", o.path("logs", "paysim.log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return "", nil, fmt.Errorf("paysim not ready within 20 s; its log is %s", o.path("logs", "paysim.log"))
}

// answers reports whether GET url is 200.
func answers(url string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// readEnvFile reads KEY=VALUE lines.
func readEnvFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var env []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "=") {
			env = append(env, l)
		}
	}
	if len(env) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return env, nil
}
