// Package deploy_test validates the alert rules and the dashboard shipped in deploy/:
// they parse, and every metric they reference is declared in coord/telemetry.go AND
// emitted by some SDK package (its constant is used outside coord).
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

	"sigs.k8s.io/yaml"
)

// sdkMetrics maps the Prometheus base name of every metric constant in
// coord/telemetry.go to the constant's name.
func sdkMetrics(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../coord/telemetry.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Metric") {
			return true
		}
		lit, ok := vs.Values[0].(*ast.BasicLit)
		if !ok {
			return true
		}
		v, _ := strconv.Unquote(lit.Value)
		out[strings.ReplaceAll(v, ".", "_")] = vs.Names[0].Name
		return true
	})
	if len(out) < 10 {
		t.Fatalf("found only %d metric constants", len(out))
	}
	return out
}

// usedConstants returns the coord.MetricX identifiers referenced by non-test Go
// files of the SDK outside coord/ itself.
func usedConstants(t *testing.T) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	re := regexp.MustCompile(`coord\.(Metric[A-Za-z]+)`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", ".git", "bench", "cmd", "reliability":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, "../coord/") && !strings.HasPrefix(path, "../coord/quotakv/") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			used[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}

var metricRef = regexp.MustCompile(`\b((?:coord|outbox|saga|idempotency|efficiencylock|failstatic|schedule)_[a-z0-9_]+)\b`)

// checkExpr asserts that every metric in a PromQL expression is emitted by the SDK.
func checkExpr(t *testing.T, where, expr string, metrics map[string]string, used map[string]bool) int {
	t.Helper()
	n := 0
	for _, m := range metricRef.FindAllString(expr, -1) {
		if m == "coord_lease" || m == "coord_tenant" || m == "coord_reason" || m == "coord_outcome" || m == "saga_type" || m == "saga_state" || m == "outbox_consumer" || m == "schedule_job" {
			continue // attribute labels
		}
		base := m
		for _, suf := range []string{"_total", "_bucket", "_sum", "_count"} {
			if _, ok := metrics[base]; !ok {
				base = strings.TrimSuffix(base, suf)
			}
		}
		name, ok := metrics[base]
		if !ok {
			t.Errorf("%s: metric %s is not declared in coord/telemetry.go", where, m)
			continue
		}
		if !used[name] {
			t.Errorf("%s: metric %s (coord.%s) is declared but no SDK package emits it", where, m, name)
		}
		n++
	}
	return n
}

func TestAlertRules(t *testing.T) {
	metrics, used := sdkMetrics(t), usedConstants(t)
	b, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		t.Fatalf("alerts.yaml is not a valid rule file: %v", err)
	}
	want := map[string]bool{"coord_fence_rejected": false, "outbox_publish_lag_ms": false, "saga_state_age_seconds": false,
		"saga_compensation_failures": false, "coord_client_staleness_seconds": false, "coord_lease_step_downs": false}
	rules := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			rules++
			where := g.Name + "/" + r.Alert
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: alert, expr, labels.severity and annotations.summary are required", where)
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("%s: unbalanced parentheses in %q", where, r.Expr)
			}
			if checkExpr(t, where, r.Expr, metrics, used) == 0 {
				t.Errorf("%s: references no coordkit metric", where)
			}
			for m := range want {
				if strings.Contains(r.Expr, m) {
					want[m] = true
				}
			}
		}
	}
	for m, ok := range want {
		if !ok {
			t.Errorf("no alert on %s (RFC signal)", m)
		}
	}
	t.Logf("%d rules in %d groups", rules, len(file.Groups))
}

func TestDashboard(t *testing.T) {
	metrics, used := sdkMetrics(t), usedConstants(t)
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
			if checkExpr(t, "panel "+p.Title, q.Expr, metrics, used) == 0 {
				t.Errorf("panel %q: query %q references no coordkit metric", p.Title, q.Expr)
			}
		}
	}
}
