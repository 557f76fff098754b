package deploy_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// etcdRule is one rule of etcd-alerts.yaml.
type etcdRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func etcdRules(t *testing.T) []etcdRule {
	t.Helper()
	b, err := os.ReadFile("prometheus/etcd-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string     `json:"name"`
			Rules []etcdRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		t.Fatalf("etcd-alerts.yaml is not a valid rule file: %v", err)
	}
	var out []etcdRule
	for _, g := range file.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// etcdMetricFamilies scrapes a running etcd's /metrics and returns the names
// it serves: every family (# TYPE) and, for a histogram, its _bucket, _sum and
// _count series.
func etcdMetricFamilies(t *testing.T) map[string]bool {
	t.Helper()
	e := coordtest.Etcd(t)
	resp, err := http.Get(e.Endpoints[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v", resp.Status, err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
			if f[3] == "histogram" {
				out[f[2]+"_bucket"], out[f[2]+"_sum"], out[f[2]+"_count"] = true, true, true
			}
		}
	}
	if len(out) < 50 {
		t.Fatalf("etcd's /metrics served only %d families", len(out))
	}
	return out
}

var etcdMetricRef = regexp.MustCompile(`\betcd_[a-z0-9_]+\b`)

// TestEtcdAlertRulesUseEtcdsRealMetrics (issue 29, point 7): deploy/ had
// alerts on coordkit's client metrics only. The etcd server rules — no leader,
// more than 3 leader changes in 15 min, WAL fsync p99, DB size over 70 % and
// 85 % of the quota — are held to the names a running etcd (the version the SDK
// builds against, started by coordtest) serves on /metrics, each with its
// runbook, which names the coordctl command that shows it.
func TestEtcdAlertRulesUseEtcdsRealMetrics(t *testing.T) {
	rules := etcdRules(t)
	served := etcdMetricFamilies(t)
	want := map[string]func(r etcdRule) bool{
		"no leader": func(r etcdRule) bool {
			return strings.Contains(r.Expr, "etcd_server_has_leader") && strings.Contains(r.Expr, "== 0")
		},
		"> 3 leader changes in 15 min": func(r etcdRule) bool {
			return strings.Contains(r.Expr, "increase(etcd_server_leader_changes_seen_total[15m])") && strings.HasSuffix(r.Expr, "> 3")
		},
		"WAL fsync p99": func(r etcdRule) bool {
			return strings.Contains(r.Expr, "histogram_quantile(0.99") && strings.Contains(r.Expr, "etcd_disk_wal_fsync_duration_seconds_bucket")
		},
		"DB size > 70 % of quota": func(r etcdRule) bool {
			return strings.Contains(r.Expr, "etcd_mvcc_db_total_size_in_bytes / etcd_server_quota_backend_bytes") && strings.HasSuffix(r.Expr, "> 70")
		},
		"DB size > 85 % of quota": func(r etcdRule) bool {
			return strings.Contains(r.Expr, "etcd_mvcc_db_total_size_in_bytes / etcd_server_quota_backend_bytes") && strings.HasSuffix(r.Expr, "> 85") &&
				r.Labels["severity"] == "page"
		},
	}
	found := map[string]bool{}
	for _, r := range rules {
		where := "etcd-alerts.yaml/" + r.Alert
		if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
			t.Errorf("%s: alert, expr, labels.severity and annotations.summary are required", where)
		}
		if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") || strings.Count(r.Expr, "[") != strings.Count(r.Expr, "]") {
			t.Errorf("%s: unbalanced brackets in %q", where, r.Expr)
		}
		names := etcdMetricRef.FindAllString(r.Expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: references no etcd metric", where)
		}
		for _, m := range names {
			if !served[m] {
				t.Errorf("%s: %s is not served by etcd's /metrics", where, m)
			}
		}
		rb := r.Annotations["runbook_url"]
		body, err := os.ReadFile(filepath.Join("..", rb))
		switch {
		case rb == "" || err != nil:
			t.Errorf("%s: runbook %q: %v", where, rb, err)
		case !strings.Contains(string(body), r.Alert) || !strings.Contains(string(body), "coordctl tenants"):
			t.Errorf("%s: runbook %s does not name the alert and the coordctl command that shows it", where, rb)
		}
		for what, ok := range want {
			if ok(r) {
				found[what] = true
			}
		}
	}
	for what := range want {
		if !found[what] {
			t.Errorf("no etcd alert on %s", what)
		}
	}
}

// TestEtcdAlertCheckCatchesAMisspelledMetric: the check above fails for a
// name etcd does not serve (the old name of the fsync histogram).
func TestEtcdAlertCheckCatchesAMisspelledMetric(t *testing.T) {
	served := etcdMetricFamilies(t)
	for _, bad := range []string{"etcd_wal_fsync_durations_seconds_bucket", "etcd_server_leader_changes_total", "etcd_debugging_mvcc_db_total_size_in_bytes"} {
		if served[bad] {
			t.Errorf("%s is served: the fixture of a misspelled name is not misspelled", bad)
		}
	}
	if !served["etcd_disk_wal_fsync_duration_seconds_bucket"] || !served["etcd_server_quota_backend_bytes"] {
		t.Fatal("the names the rules use are not served")
	}
}
