package coordtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// AlertRule is one rule of deploy/prometheus/alerts.yaml.
type AlertRule struct {
	Group       string
	Alert       string
	Expr        string
	For         string
	Labels      map[string]string
	Annotations map[string]string
}

// AlertRules returns the rules of the repository's deploy/prometheus/alerts.yaml
// (found from the test's directory up to the module root), failing the test when
// the file is missing or does not parse as a rule file (strictly: an unknown
// field fails). A package's test holds its alerts, its
// metric names and its runbooks together with it.
func AlertRules(t testing.TB) []AlertRule {
	t.Helper()
	path := filepath.Join(repoRoot(t), "deploy", "prometheus", "alerts.yaml")
	b, err := os.ReadFile(path)
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
		t.Fatalf("coordtest: %s: %v", path, err)
	}
	var out []AlertRule
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out = append(out, AlertRule{Group: g.Name, Alert: r.Alert, Expr: r.Expr, For: r.For, Labels: r.Labels, Annotations: r.Annotations})
		}
	}
	return out
}

// repoRoot returns the directory, from the test's up, that holds
// deploy/prometheus/alerts.yaml: the repository's root.
func repoRoot(t testing.TB) string {
	t.Helper()
	for dir, _ := os.Getwd(); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "deploy", "prometheus", "alerts.yaml")); err == nil {
			return dir
		}
	}
	t.Fatal("coordtest: no deploy/prometheus/alerts.yaml above the test's directory")
	return ""
}

// AlertsAgree holds a package's alerts, its metric names, its runbooks and its
// guide together: every alert of want is a rule of deploy/prometheus/alerts.yaml
// whose expression queries its metric, whose description ends in "Runbook:
// <path>" naming a file that exists, and which guide (a path from the
// repository's root, e.g. "docs/ownership.md") names. want maps each alert to
// the OpenTelemetry name of the metric it queries with the suffix the
// Prometheus exporter adds ("coordkit.schedule.fires_total"); the dots become
// underscores. Each disagreement is a test error.
func AlertsAgree(t testing.TB, guide string, want map[string]string) {
	t.Helper()
	root := repoRoot(t)
	text, err := os.ReadFile(filepath.Join(root, guide))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range AlertRules(t) {
		metric, ok := want[r.Alert]
		if !ok {
			continue
		}
		seen[r.Alert] = true
		if metric = strings.ReplaceAll(metric, ".", "_"); !strings.Contains(r.Expr, metric) {
			t.Errorf("%s: expr %q does not query %s", r.Alert, r.Expr, metric)
		}
		_, runbook, ok := strings.Cut(r.Annotations["description"], "Runbook: ")
		if !ok {
			t.Errorf("%s: no runbook in its description", r.Alert)
		} else if _, err := os.Stat(filepath.Join(root, strings.TrimSpace(runbook))); err != nil {
			t.Errorf("%s: runbook %s: %v", r.Alert, runbook, err)
		}
		if !strings.Contains(string(text), r.Alert) {
			t.Errorf("%s is not named in %s", r.Alert, guide)
		}
	}
	for alert := range want {
		if !seen[alert] {
			t.Errorf("alert %s is missing from deploy/prometheus/alerts.yaml", alert)
		}
	}
}
