// Package deploy_test validates the alert rules and the dashboard shipped in deploy/:
// they parse, and every metric they reference is an instrument some SDK package
// creates (its name a constant beside the package, its unit from metric.WithUnit).
package deploy_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// instrumentCtors are the OpenTelemetry meter methods that create an instrument.
var instrumentCtors = regexp.MustCompile(`^(Int64|Float64)(Observable)?(Counter|UpDownCounter|Histogram|Gauge)$`)

// sdkMetrics maps the Prometheus base name of every instrument an SDK package
// creates (in its metrics.go: the name is a constant of the package, the unit a
// metric.WithUnit option) to its OpenTelemetry name, and returns the attribute
// keys (every other "coordkit." constant) as Prometheus labels.
func sdkMetrics(t *testing.T) (metrics map[string]string, labels map[string]bool) {
	t.Helper()
	metrics, labels = map[string]string{}, map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", ".git", "bench", "cmd", "reliability", "testing", "scripts":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		consts := map[string]string{}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[vs.Names[i].Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
			return true
		})
		names := map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !instrumentCtors.MatchString(sel.Sel.Name) {
				return true
			}
			id, ok := call.Args[0].(*ast.Ident)
			if !ok || consts[id.Name] == "" {
				return true
			}
			name, unit := consts[id.Name], ""
			for _, a := range call.Args[1:] {
				if c, ok := a.(*ast.CallExpr); ok && len(c.Args) == 1 {
					if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "WithUnit" {
						if lit, ok := c.Args[0].(*ast.BasicLit); ok {
							unit, _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
			base := strings.ReplaceAll(name, ".", "_")
			if unit == "s" {
				base += "_seconds"
			}
			metrics[base] = name
			names[name] = true
			return true
		})
		for _, v := range consts {
			if strings.HasPrefix(v, "coordkit.") && !names[v] {
				labels[strings.ReplaceAll(v, ".", "_")] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(metrics) < 10 {
		t.Fatalf("found only %d instruments", len(metrics))
	}
	return metrics, labels
}

var metricRef = regexp.MustCompile(`\bcoordkit_[a-z0-9_]+\b`)

// checkExpr asserts that every metric in a PromQL expression is one an SDK
// package creates.
func checkExpr(t *testing.T, where, expr string, metrics map[string]string, labels map[string]bool) int {
	t.Helper()
	n := 0
	for _, m := range metricRef.FindAllString(expr, -1) {
		if labels[m] {
			continue
		}
		base := m
		for _, suf := range []string{"_total", "_bucket", "_sum", "_count"} {
			if _, ok := metrics[base]; !ok {
				base = strings.TrimSuffix(base, suf)
			}
		}
		if _, ok := metrics[base]; !ok {
			t.Errorf("%s: metric %s is not an instrument of any SDK package", where, m)
			continue
		}
		n++
	}
	return n
}

func TestAlertRules(t *testing.T) {
	metrics, labels := sdkMetrics(t)
	want := map[string]bool{"coordkit_pgfence_rejected": false, "coordkit_outbox_publish_lag_seconds": false, "coordkit_saga_state_age_seconds": false,
		"coordkit_saga_compensation_failures": false, "coordkit_failstatic_staleness_seconds": false, "coordkit_correctnesslease_step_downs": false}
	rules := coordtest.AlertRules(t) // strict: an unknown field fails
	groups := map[string]bool{}
	for _, r := range rules {
		groups[r.Group] = true
		where := r.Group + "/" + r.Alert
		if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
			t.Errorf("%s: alert, expr, labels.severity and annotations.summary are required", where)
		}
		if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
			t.Errorf("%s: unbalanced parentheses in %q", where, r.Expr)
		}
		if checkExpr(t, where, r.Expr, metrics, labels) == 0 {
			t.Errorf("%s: references no coordkit metric", where)
		}
		for m := range want {
			if strings.Contains(r.Expr, m) {
				want[m] = true
			}
		}
	}
	for m, ok := range want {
		if !ok {
			t.Errorf("no alert on %s (RFC signal)", m)
		}
	}
	t.Logf("%d rules in %d groups", len(rules), len(groups))
}

func TestDashboard(t *testing.T) {
	metrics, labels := sdkMetrics(t)
	b, err := os.ReadFile("grafana/coordkit.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("coordkit.json: %v", err)
	}
	if d.UID == "" || len(d.Panels) < 8 {
		t.Fatalf("dashboard has uid %q and %d panels", d.UID, len(d.Panels))
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if checkExpr(t, "panel "+p.Title, q.Expr, metrics, labels) == 0 {
				t.Errorf("panel %q: query %q references no coordkit metric", p.Title, q.Expr)
			}
		}
	}
}
