package coordtest

import (
	"os"
	"path/filepath"
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
	path := ""
	for dir, _ := os.Getwd(); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "deploy", "prometheus", "alerts.yaml")); err == nil {
			path = filepath.Join(dir, "deploy", "prometheus", "alerts.yaml")
			break
		}
	}
	if path == "" {
		t.Fatal("coordtest: no deploy/prometheus/alerts.yaml above the test's directory")
	}
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
