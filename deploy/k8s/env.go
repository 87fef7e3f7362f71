package k8s

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Services are the stockflow binaries that run as Deployments, each built from
// services/<svc>/cmd/<svc> and listing its variables with `<svc> env`: the four services and
// the operations console.
var Services = []string{"order", "stock", "payment-adapter", "timeout", "console"}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ServiceEnv builds each service's binary into binDir and runs `<svc> env` with environment
// environ, which prints the variables the service's config reads, one a line: the name, then
// optional tab-separated columns, which are ignored. Each service is built in its own module
// directory (services/<svc> under repoRoot), so the build follows the caller's GOWORK: the
// workspace, or with GOWORK=off the service's own go.mod.
func ServiceEnv(ctx context.Context, repoRoot, binDir string, environ []string, services ...string) (map[string][]string, error) {
	errs := make([]error, len(services))
	var wg sync.WaitGroup
	for i, s := range services {
		wg.Go(func() {
			build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(binDir, s), "./cmd/"+s)
			build.Dir = filepath.Join(repoRoot, "services", s)
			if out, err := build.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("build %s: %w\n%s", s, err, out)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	env := map[string][]string{}
	for _, s := range services {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, s), "env")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Env = append([]string{}, environ...) // never nil: nil would inherit the test's
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s env: %w\n%s", s, err, stderr.Bytes())
		}
		names, err := parseEnv(stdout.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s env: %w", s, err)
		}
		env[s] = names
	}
	return env, nil
}

// parseEnv reads the first field of each non-empty line of an `env` listing, leaving out the
// variables marked "unset" (fault injection only, such as CLOCK_OFFSET): a deployment gives
// them no source.
func parseEnv(out []byte) ([]string, error) {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name, columns, _ := strings.Cut(line, "\t")
		name = strings.TrimSpace(name)
		if !envName.MatchString(name) {
			return nil, fmt.Errorf("line %q: %q is not a variable name", line, name)
		}
		if slices.Contains(strings.Split(columns, "\t"), "unset") {
			continue
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no variables listed")
	}
	return names, sc.Err()
}
