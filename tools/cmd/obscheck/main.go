// Command obscheck keeps stockflow's alerts and dashboard true to its metrics: every metric an
// alert rule (deploy/prometheus/alerts.yml) or a dashboard panel (deploy/grafana/*.json) names
// must be in the catalogue of docs/observability.md, and every dashboard query is written out
// as a recording rule (-queries FILE) so that promtool check rules parses it. scripts/rules.sh
// runs it before promtool; it exits 1 on any unknown metric.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

func main() {
	root := flag.String("root", ".", "the repository")
	queries := flag.String("queries", "", "write the dashboards' queries here as a rule file for promtool")
	flag.Parse()
	if err := run(*root, *queries, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "obscheck:", err)
		os.Exit(1)
	}
}

func run(root, queriesOut string, w io.Writer) error {
	doc, err := os.ReadFile(filepath.Join(root, "docs/observability.md"))
	if err != nil {
		return err
	}
	known := catalogue(string(doc))
	if len(known) == 0 {
		return fmt.Errorf("docs/observability.md lists no metrics")
	}
	alerts, err := alertExprs(filepath.Join(root, "deploy/prometheus/alerts.yml"))
	if err != nil {
		return err
	}
	boards, err := filepath.Glob(filepath.Join(root, "deploy/grafana/*.json"))
	if err != nil {
		return err
	}
	var queries []string
	for _, b := range boards {
		qs, err := dashboardExprs(b)
		if err != nil {
			return err
		}
		queries = append(queries, qs...)
	}
	var unknown []string
	for _, e := range append(slices.Clone(alerts), queries...) {
		for _, m := range metricsIn(e) {
			if !known[m] {
				unknown = append(unknown, fmt.Sprintf("%s (in %q)", m, e))
			}
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("metrics not in docs/observability.md:\n  %s", strings.Join(unknown, "\n  "))
	}
	fmt.Fprintf(w, "obscheck: %d alert and %d dashboard queries name only the %d catalogued metrics\n", len(alerts), len(queries), len(known))
	if queriesOut == "" {
		return nil
	}
	return writeRules(queriesOut, queries)
}

// catalogue is the metric names in the first column of docs/observability.md's table.
func catalogue(doc string) map[string]bool {
	known := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_:][a-z0-9_:]*)` \\|").FindAllStringSubmatch(doc, -1) {
		known[m[1]] = true
	}
	return known
}

var metricName = regexp.MustCompile(`\b(?:stockflow|http_server)_[a-z0-9_]+`)

// metricsIn is the stockflow metrics expr names, histogram series folded into their metric.
func metricsIn(expr string) []string {
	var out []string
	for _, m := range metricName.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if strings.HasSuffix(m, "_seconds"+suffix) || strings.HasSuffix(m, "_size"+suffix) {
				m = strings.TrimSuffix(m, suffix)
			}
		}
		out = append(out, m)
	}
	return out
}

func alertExprs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Expr string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out, nil
}

// dashboardExprs is every panel query of a Grafana dashboard, and its variables' queries.
func dashboardExprs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	return out, nil
}

// grafanaVars are the dashboard variables a query may use, with a value PromQL parses.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$__interval", "1m", "$sku", ".*")

// writeRules writes queries as recording rules, so promtool check rules parses each one.
func writeRules(path string, queries []string) error {
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	rules := make([]rule, len(queries))
	for i, q := range queries {
		rules[i] = rule{Record: fmt.Sprintf("dashboard:query_%d", i+1), Expr: grafanaVars.Replace(q)}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
