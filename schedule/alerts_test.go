package schedule

import (
	"testing"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestAlertsAgreeWithDocs holds the schedule alerts, the metric names, the
// runbooks and the guide together: each alert queries its metric under its
// Prometheus name, names a runbook that exists, and is named in
// docs/schedule.md.
func TestAlertsAgreeWithDocs(t *testing.T) {
	coordtest.AlertsAgree(t, "docs/schedule.md", map[string]string{
		"ScheduleJobNoRecentSuccess":   "coordkit.schedule.last_success.age_seconds",
		"ScheduleFiresMissed":          "coordkit.schedule.missed_total",
		"ScheduleFiresFailed":          "coordkit.schedule.fires_total",
		"ScheduleFireLagHigh":          "coordkit.schedule.fire.lag_seconds_bucket",
		"ScheduleStaleSchedulerFenced": "coordkit.schedule.duplicates_rejected_total",
	})
}
