// Command importcheck enforces stockflow's import direction over the packages go list names
// (make lint passes every package of every workspace module):
//
//   - a domain package (services/<svc>/internal/<noun>, any folder not named after a layer)
//     imports the standard library, pkg/events and its own service's domain packages only;
//   - a use-case package (internal/app) imports no database, broker or transport library and
//     none of its own service's adapters (postgres, httpapi, consumers, wire, provider);
//   - a service never imports another service;
//   - pkg imports no service and no tool.
//
// It prints one line per broken rule and exits 1 when there is any.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

const module = "github.com/stockflow/stockflow/"

// layers are the folders under a service's internal/ that are not domain packages.
var layers = map[string]bool{
	"app": true, "postgres": true, "httpapi": true, "consumers": true, "config": true,
	"wire": true, "reconcile": true, "provider": true,
}

// adapters are the layers that implement or drive the use cases.
var adapters = map[string]bool{"postgres": true, "httpapi": true, "consumers": true, "wire": true, "provider": true}

// infrastructure is what a use-case package must reach only through its ports. (net/http is
// not in it: a payment callback's headers are what a provider signs.)
var infrastructure = []string{"github.com/jackc/pgx", "github.com/nats-io/", "github.com/go-kit/"}

func main() {
	out, err := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, os.Args[1:]...)...).Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "importcheck: go list:", err)
		os.Exit(2)
	}
	if n := check(bytes.NewReader(out), os.Stdout); n > 0 {
		fmt.Fprintf(os.Stderr, "importcheck: %d imports against the direction of the layers\n", n)
		os.Exit(1)
	}
}

// check reads "package import import…" lines and writes one line per broken rule; it returns
// how many it wrote.
func check(r io.Reader, w io.Writer) int {
	n := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		pkg := fields[0]
		for _, imp := range fields[1:] {
			if why := broken(pkg, imp); why != "" {
				fmt.Fprintf(w, "%s imports %s: %s\n", pkg, imp, why)
				n++
			}
		}
	}
	return n
}

// where splits a stockflow import path into its area (pkg, services, tools, test), its
// service (for services) and the layer folder under internal/ ("" when none).
func where(path string) (area, svc, layer string) {
	rel, ok := strings.CutPrefix(path, module)
	if !ok {
		return "", "", ""
	}
	parts := strings.Split(rel, "/")
	area = parts[0]
	if area == "services" && len(parts) > 1 {
		svc = parts[1]
		if len(parts) > 3 && parts[2] == "internal" {
			layer = parts[3]
		}
	}
	return area, svc, layer
}

func std(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

// broken says which rule pkg importing imp breaks ("" when none).
func broken(pkg, imp string) string {
	area, svc, layer := where(pkg)
	impArea, impSvc, impLayer := where(imp)
	switch {
	case area == "pkg" && (impArea == "services" || impArea == "tools" || impArea == "test"):
		return "pkg is shared infrastructure: it imports no service and no tool"
	case area == "services" && impArea == "services" && impSvc != svc:
		return "services talk through events and HTTP, never through each other's code"
	case area == "services" && layer != "" && !layers[layer]:
		if std(imp) || imp == module+"pkg/events" || (impSvc == svc && impLayer != "" && !layers[impLayer]) {
			return ""
		}
		return "a domain package imports the standard library, pkg/events and its own domain only"
	case area == "services" && layer == "app" && impSvc == svc && adapters[impLayer]:
		return "use cases define the ports their adapters implement, never the other way round"
	case area == "services" && layer == "app":
		for _, infra := range infrastructure {
			if imp == infra || strings.HasPrefix(imp, infra) {
				return "use cases reach the database, the broker and the transport through ports"
			}
		}
	}
	return ""
}
