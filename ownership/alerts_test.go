package ownership_test

import (
	"testing"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestAlertsAgreeWithDocs holds the ownership alerts, the metric names, the
// runbook and the guide together: each alert queries its metric under its
// Prometheus name, names a runbook that exists, and is named in
// docs/ownership.md.
func TestAlertsAgreeWithDocs(t *testing.T) {
	coordtest.AlertsAgree(t, "docs/ownership.md", map[string]string{
		"CoordOwnershipUnowned": "coordkit.ownership.unowned",
		"CoordOwnershipChurn":   "coordkit.ownership.target_writes_total",
	})
}
