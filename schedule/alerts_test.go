package schedule

import (
	"os"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestAlertsAgreeWithDocs holds the schedule alerts, the metric names, the
// runbooks and the guide together: each alert queries its metric under the
// Prometheus name of the coord constant, names a runbook that exists, and is
// named in docs/schedule.md.
func TestAlertsAgreeWithDocs(t *testing.T) {
	guide, err := os.ReadFile("../docs/schedule.md")
	if err != nil {
		t.Fatal(err)
	}
	prom := func(name, suffix string) string { return strings.ReplaceAll(name, ".", "_") + suffix }
	const (
		fires, lag, missed  = "coordkit.schedule.fires", "coordkit.schedule.fire.lag", "coordkit.schedule.missed"
		duplicates, success = "coordkit.schedule.duplicates_rejected", "coordkit.schedule.last_success.age"
	)
	want := map[string]string{
		"ScheduleJobNoRecentSuccess":   prom(success, "_seconds"),
		"ScheduleFiresMissed":          prom(missed, "_total"),
		"ScheduleFiresFailed":          prom(fires, "_total"),
		"ScheduleFireLagHigh":          prom(lag, "_seconds_bucket"),
		"ScheduleStaleSchedulerFenced": prom(duplicates, "_total"),
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
			t.Errorf("%s is not named in docs/schedule.md", r.Alert)
		}
	}
	for alert := range want {
		t.Errorf("alert %s is missing from deploy/prometheus/alerts.yaml", alert)
	}
}
