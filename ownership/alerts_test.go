package ownership_test

import (
	"os"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestAlertsAgreeWithDocs holds the ownership alerts, the metric names, the
// runbook and the guide together: each alert queries its metric under the
// Prometheus name of the coord constant, names a runbook that exists, and is
// named in docs/ownership.md.
func TestAlertsAgreeWithDocs(t *testing.T) {
	guide, err := os.ReadFile("../docs/ownership.md")
	if err != nil {
		t.Fatal(err)
	}
	prom := func(name, suffix string) string { return strings.ReplaceAll(name, ".", "_") + suffix }
	want := map[string]string{
		"CoordOwnershipUnowned": prom("coordkit.ownership.unowned", ""),
		"CoordOwnershipChurn":   prom("coordkit.ownership.target_writes", "_total"),
	}
	for _, r := range coordtest.AlertRules(t) {
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
	for a := range want {
		t.Errorf("alert %s missing from deploy/prometheus/alerts.yaml", a)
	}
}
