package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/stockflow/stockflow/pkg/freeport"
)

// consolePkg is the operations console (decision 0007): no database or broker, it calls the
// services' public APIs with the signed-in person's token.
const consolePkg = "./services/console/cmd/console"

// DefaultConsolePort is the console's HTTP port.
const DefaultConsolePort = 8085

// CompareReport is where `stockflow compare` writes its report and the console's compare page
// reads it.
func (o Options) CompareReport() string { return o.path("compare.json") }

// startConsole starts the console on o.ConsolePort (-1: a free port), pointed at the services
// in urls, and waits until it answers; it returns its URL. The console keeps no state, so it is
// started once, not supervised.
func startConsole(ctx context.Context, o Options, urls map[string]string) (string, error) {
	port := o.ConsolePort
	if port < 0 {
		var err error
		if port, err = freeport.Port(); err != nil {
			return "", err
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := portFree(addr, 5*time.Second); err != nil {
		return "", fmt.Errorf("the console's port %d is taken (is stockflow already up? `make down`, or set STOCKFLOW_PORT_OFFSET): %w", port, err)
	}
	cmd := exec.Command(o.path("bin", "console"), "serve")
	cmd.Env = append(os.Environ(), "HTTP_ADDR="+addr,
		"CONSOLE_ORDER_URL="+urls["order"], "CONSOLE_STOCK_URL="+urls["stock"],
		"CONSOLE_PAYMENT_URL="+urls["payment-adapter"], "CONSOLE_TIMEOUT_URL="+urls["timeout"],
		"CONSOLE_COMPARE_REPORT="+o.CompareReport())
	exited, err := spawn(o, "console", cmd)
	if err != nil {
		return "", err
	}
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if answers(url + "/readyz") {
			return url, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-exited:
			return "", fmt.Errorf("console exited during start; its log is %s", o.path("logs", "console.log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("console not ready within 20 s; its log is %s", o.path("logs", "console.log"))
}

// CompareReport is where this system's console reads the compare report.
func (s *System) CompareReport() string { return s.opts.CompareReport() }
