package correctnesslease

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// expiryReasons are the loss reasons that mean the holder's own lease lapsed:
// what the step-down alert counts and the GC-pause runbook queries.
var expiryReasons = []coord.LossReason{coord.LossRenewalDeadline, coord.LossSessionExpired}

// TestStepDownAlertAgreesWithDocs holds the step-down alert rule, the metric
// tables and the runbook together: one rule, one threshold, one severity, and
// the reasons the package reports when a holder's own lease lapsed.
func TestStepDownAlertAgreesWithDocs(t *testing.T) {
	const alert = "CoordLeaseStepDownsHigh"
	var expr, severity string
	for _, r := range coordtest.AlertRules(t) {
		if r.Alert == alert {
			expr, severity = r.Expr, r.Labels["severity"]
		}
	}
	m := regexp.MustCompile(`coordkit_correctnesslease_step_downs_total\{coordkit_reason=~"([^"]+)"\}\[1h\]\)\) > (\d+)$`).FindStringSubmatch(expr)
	if m == nil || severity == "" {
		t.Fatalf("%s: expr %q (severity %q) is not a per-hour count of step-downs by coordkit_reason with a threshold", alert, expr, severity)
	}
	selector, threshold := m[1], m[2]
	var want []string
	for _, r := range expiryReasons {
		want = append(want, string(r))
	}
	if got := strings.Split(selector, "|"); !slices.Equal(got, want) {
		t.Errorf("%s counts reasons %v, want %v", alert, got, want)
	}
	if n, _ := strconv.Atoi(threshold); n <= 0 {
		t.Errorf("%s threshold %q", alert, threshold)
	}

	// Every document that describes the rule states it the same way.
	for _, doc := range []string{"../docs/correctnesslease.md", "../docs/metrics.md", "../docs/runbooks/gc-pause-double-charge.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		// The paragraph (or table row) that names the alert.
		var para string
		for _, p := range strings.Split(text, "\n\n") {
			for _, line := range strings.Split(p, "\n") {
				if strings.Contains(line, alert) {
					if strings.HasPrefix(line, "|") {
						para += line + "\n"
					} else {
						para += p + "\n"
					}
				}
			}
		}
		if para == "" {
			t.Errorf("%s does not mention %s", doc, alert)
			continue
		}
		for _, r := range want {
			if !strings.Contains(para, r) {
				t.Errorf("%s: %s described without reason %s:\n%s", doc, alert, r, para)
			}
		}
		if !regexp.MustCompile(`\b` + severity + `\b`).MatchString(para) {
			t.Errorf("%s: %s described without its severity %q:\n%s", doc, alert, severity, para)
		}
		if !strings.Contains(para, "> "+threshold+"/h") && !strings.Contains(para, "more than "+threshold+" in an hour") {
			t.Errorf("%s: %s described without its threshold (> %s/h):\n%s", doc, alert, threshold, para)
		}
		// No other step-down threshold anywhere in the document.
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "step_downs") {
				for _, n := range regexp.MustCompile(`> (\d+)/h`).FindAllStringSubmatch(line, -1) {
					if n[1] != threshold {
						t.Errorf("%s: a step-down threshold of %s/h, the rule says %s/h: %q", doc, n[1], threshold, line)
					}
				}
			}
		}
	}
	// The runbook's query is the rule's selector.
	rb, err := os.ReadFile("../docs/runbooks/gc-pause-double-charge.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rb), `coordkit_reason=~"`+selector+`"`) {
		t.Errorf("the runbook's query does not use the rule's selector coordkit_reason=~%q", selector)
	}
}
