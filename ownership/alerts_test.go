package ownership_test

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestAlertsAgreeWithDocs holds the ownership alerts, the metric names, the
// runbook and the guide together: each alert queries its metric under the
// Prometheus name of the coord constant, names a runbook that exists, and is
// named in docs/ownership.md.
func TestAlertsAgreeWithDocs(t *testing.T) {
	b, err := os.ReadFile("../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile("../docs/ownership.md")
	if err != nil {
		t.Fatal(err)
	}
	prom := func(name, suffix string) string { return strings.ReplaceAll(name, ".", "_") + suffix }
	want := map[string]string{
		"CoordOwnershipUnowned": prom("coordkit.ownership.unowned", ""),
		"CoordOwnershipChurn":   prom("coordkit.ownership.target_writes", "_total"),
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			metric, ok := want[r.Alert]
			if !ok {
				continue
			}
			delete(want, r.Alert)
			if !strings.Contains(r.Expr, metric) {
				t.Errorf("%s: expr %q does not query %s", r.Alert, r.Expr, metric)
			}
			_, runbook, ok := strings.Cut(r.Annotations["description"], "Runbook: ")
			if !ok {
				t.Errorf("%s: no runbook in its description", r.Alert)
			} else if _, err := os.Stat("../" + strings.TrimSpace(runbook)); err != nil {
				t.Errorf("%s: runbook %s: %v", r.Alert, runbook, err)
			}
			if !strings.Contains(string(guide), r.Alert) {
				t.Errorf("%s is not named in docs/ownership.md", r.Alert)
			}
		}
	}
	for a := range want {
		t.Errorf("alert %s missing from deploy/prometheus/alerts.yaml", a)
	}
}
