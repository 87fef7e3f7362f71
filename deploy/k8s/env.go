package k8s

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Services are the stockflow services, each built from services/<svc>/cmd/<svc>.
var Services = []string{"order", "stock", "payment-adapter", "timeout"}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ServiceEnv builds each service's binary into binDir (one go build from repoRoot, the
// go.work root) and runs `<svc> env` with environment environ, which prints the variables
// the service's config reads, one a line: the name, then optional tab-separated columns,
// which are ignored.
func ServiceEnv(ctx context.Context, repoRoot, binDir string, environ []string, services ...string) (map[string][]string, error) {
	args := []string{"build", "-o", binDir + string(filepath.Separator)}
	for _, s := range services {
		args = append(args, "./services/"+s+"/cmd/"+s)
	}
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build services: %w\n%s", err, out)
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

// parseEnv reads the first field of each non-empty line of an `env` listing.
func parseEnv(out []byte) ([]string, error) {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name, _, _ := strings.Cut(line, "\t")
		name = strings.TrimSpace(name)
		if !envName.MatchString(name) {
			return nil, fmt.Errorf("line %q: %q is not a variable name", line, name)
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no variables listed")
	}
	return names, sc.Err()
}
