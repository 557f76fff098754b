package coordtest

import (
	"strings"
	"testing"
)

// TestAlertsAgreeCatchesDisagreements: AlertsAgree passes the repository's own
// ownership alerts and reports, each by name, an alert that queries another
// metric, an alert the rule file lacks, and an alert its guide does not name.
func TestAlertsAgreeCatchesDisagreements(t *testing.T) {
	AlertsAgree(t, "docs/ownership.md", map[string]string{"CoordOwnershipUnowned": "coordkit.ownership.unowned"})

	f := &fakeT{TB: t}
	AlertsAgree(f, "docs/ownership.md", map[string]string{
		"CoordOwnershipUnowned": "coordkit.ownership.owned_total", // another metric
		"CoordNoSuchAlert":      "coordkit.ownership.unowned",     // not in alerts.yaml
		"ScheduleFireLagHigh":   "coordkit.schedule.fire.lag",     // not in docs/ownership.md
		"CoordOwnershipChurn":   "coordkit.ownership.target_writes_total",
		"ScheduleFiresMissed":   "coordkit.schedule.missed_total", // not in docs/ownership.md
	})
	got := strings.Join(f.errors, "\n")
	for _, want := range []string{
		"CoordOwnershipUnowned: expr",
		"alert CoordNoSuchAlert is missing",
		"ScheduleFireLagHigh is not named in docs/ownership.md",
		"ScheduleFiresMissed is not named in docs/ownership.md",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("AlertsAgree did not report %q; it reported:\n%s", want, got)
		}
	}
	if strings.Contains(got, "CoordOwnershipChurn") {
		t.Errorf("AlertsAgree reported the agreeing CoordOwnershipChurn:\n%s", got)
	}
}
