package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/cli"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

// TestBulkRequeueOf5000ParkedEvents (issue 29, point 3): 5,000 parked events
// needed 5,000 submissions. Now one command selects them by filter, shows the
// count first (the dry run changes nothing), compares every event with what
// the preview read (one changed since: nothing done, exit 3, the refusal
// audited), and applies to all 5,000 in under 10 s as ONE audited operation
// with its row count; the list pages through them with "N of M".
func TestBulkRequeueOf5000ParkedEvents(t *testing.T) {
	e := testenv.Seeded(t)
	const n, key = 5000, "invoice-batch-42"
	e.ParkMany(t, n, key, "schema registry: subject orders-value not found")
	r := newRunner(t, e)
	count := func(q string, args ...any) int {
		t.Helper()
		var c int
		if err := e.DB.Pool.QueryRow(testenv.Ctx(t), q, args...).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}

	var page admin.ParkedPage
	r.decode(&page, "outbox", "parked", "list", "--search", "SCHEMA REGISTRY", "--limit", "50")
	if len(page.Events) != 50 || page.Total != n || page.Next == "" || page.Counts["parked"] != n+1 {
		t.Fatalf("parked list --search: %d events, total %d, next %q, counts %v: want 50 of %d with a next page", len(page.Events), page.Total, page.Next, page.Counts, n)
	}
	var next admin.ParkedPage
	r.decode(&next, "outbox", "parked", "list", "--search", "schema registry", "--after", page.Next, "--limit", "50")
	if len(next.Events) != 50 || next.Events[0].Seq <= page.Events[49].Seq {
		t.Fatalf("the second page does not follow the first: %d events, first seq %d after %d", len(next.Events), next.Events[0].Seq, page.Events[49].Seq)
	}
	out, _, code := r.run("outbox", "parked", "list", "--key", key)
	if code != cli.ExitOK || !strings.Contains(strings.Join(strings.Fields(out), " "), "Showing: 50 of 5000 parked events") {
		t.Fatalf("parked list --key: exit %d, no \"50 of 5000\":\n%s", code, out)
	}

	// The dry run: the count, nothing changed, no audit row.
	var preview admin.BulkChange
	r.decode(&preview, "outbox", "parked", "requeue", "--key", key, "--reason", "registry subject restored (INC-501)", "--dry-run")
	if !preview.DryRun || preview.Rows != n || preview.Version == "" || len(preview.Sample) != 10 {
		t.Fatalf("dry run = rows %d, version %q, %d shown, dry %v", preview.Rows, preview.Version, len(preview.Sample), preview.DryRun)
	}
	if p := count(`SELECT count(*) FROM coord_outbox_parked WHERE aggregateid = $1`, key); p != n || count(`SELECT count(*) FROM coordctl_audit`) != 0 {
		t.Fatalf("after the dry run: %d parked, audit rows written", p)
	}
	// Without --confirm on a pipe: refused, nothing done.
	if _, errs, code := r.run("outbox", "parked", "requeue", "--key", key, "--reason", "r"); code != cli.ExitRefused || !strings.Contains(errs, "5000") {
		t.Fatalf("bulk requeue without --confirm: exit %d %s", code, errs)
	}

	// One event changes after the preview: the change is refused whole.
	var first string
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT id FROM coord_outbox_parked WHERE aggregateid = $1 ORDER BY seq LIMIT 1`, key).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Pool.Exec(testenv.Ctx(t), `UPDATE coord_outbox_parked SET attempts = attempts + 1, parked_at = clock_timestamp() WHERE id = $1`, first); err != nil {
		t.Fatal(err)
	}
	_, errs, code := r.run("outbox", "parked", "requeue", "--key", key, "--reason", "registry subject restored (INC-501)", "--confirm", "--expect", preview.Version, "-o", "json")
	var je struct {
		Kind    string `json:"kind"`
		AuditID int64  `json:"audit_id"`
	}
	jsonErr := errs[max(0, strings.Index(errs, "{\n")):] // after the log line
	if code != cli.ExitConflict || json.Unmarshal([]byte(jsonErr), &je) != nil || je.Kind != "conflict" || je.AuditID == 0 {
		t.Fatalf("bulk requeue of a changed selection: exit %d %s: want 3, a JSON conflict, audited", code, errs)
	}
	if p := count(`SELECT count(*) FROM coord_outbox_parked WHERE aggregateid = $1`, key); p != n {
		t.Fatalf("the refused bulk requeue moved %d events", n-p)
	}

	// Preview again, apply: all 5,000, compare-and-set on each, one audit row, under 10 s.
	r.decode(&preview, "outbox", "parked", "requeue", "--key", key, "--reason", "registry subject restored (INC-501)", "--dry-run")
	start := time.Now()
	var done admin.BulkChange
	r.decode(&done, "outbox", "parked", "requeue", "--key", key, "--reason", "registry subject restored (INC-501)", "--confirm", "--expect", preview.Version)
	took := time.Since(start)
	if done.DryRun || done.Rows != n || done.AuditID == 0 {
		t.Fatalf("bulk requeue = %+v", done)
	}
	if took > 10*time.Second {
		t.Fatalf("the bulk requeue of %d events took %v, over 10 s", n, took)
	}
	t.Logf("bulk requeue of %d parked events: %v (the command), %v (the transaction)", n, took.Round(time.Millisecond), done.Took.Round(time.Millisecond))
	if p, q := count(`SELECT count(*) FROM coord_outbox_parked WHERE aggregateid = $1`, key),
		count(`SELECT count(*) FROM coord_outbox WHERE aggregateid = $1 AND published_at IS NULL AND attempts = 0`, key); p != 0 || q != n {
		t.Fatalf("after the bulk requeue: %d still parked, %d back in the outbox", p, q)
	}
	var rows int64
	var action, outcome string
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT action, outcome, rows FROM coordctl_audit WHERE id = $1`, done.AuditID).Scan(&action, &outcome, &rows); err != nil ||
		action != "outbox.requeue.bulk" || outcome != "applied" || rows != n {
		t.Fatalf("the audit row: %s %s rows %d, %v", action, outcome, rows, err)
	}
	if a := count(`SELECT count(*) FROM coordctl_audit WHERE outcome = 'applied'`); a != 1 {
		t.Fatalf("%d applied audit rows for one bulk change", a)
	}

	// Sagas too: a bulk retry by state and type, the count first.
	var sp admin.BulkChange
	r.decode(&sp, "saga", "retry", "--state", "running", "--reason", "provider back", "--dry-run")
	if sp.Rows != 1 || sp.Action != "saga.retry.bulk" {
		t.Fatalf("saga retry --state running --dry-run = %+v", sp)
	}
	for _, bad := range [][]string{{"outbox", "parked", "requeue", "--reason", "r", "--confirm"}, {"outbox", "parked", "requeue", "x", "--key", "k", "--reason", "r"},
		{"saga", "retry", "--reason", "r"}} {
		if _, errs, code := r.run(bad...); code != cli.ExitUsage {
			t.Errorf("coordctl %q: exit %d %s, want 2", bad, code, errs)
		}
	}
}
