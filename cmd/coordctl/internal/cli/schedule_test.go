package cli_test

import (
	"strings"
	"testing"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/cli"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

// TestScheduleCommands: list and get show a registered job with its next
// fire; pause needs a reason and --confirm, then pauses it with one audit row
// in coordctl's table and one in the schedule's; a stale --expect is a
// conflict; backfill checks its range; an unknown job is not found.
func TestScheduleCommands(t *testing.T) {
	e := testenv.New(t)
	e.SeedSchedule(t)
	r := newRunner(t, e)
	out, errs, code := r.run("schedule", "list")
	if code != cli.ExitOK || !strings.Contains(out, "acme") || !strings.Contains(out, "invoices") || !strings.Contains(out, "0 9 1 * *") ||
		!strings.Contains(out, "acme/invoices@") {
		t.Fatalf("schedule list: exit %d\n%s%s", code, out, errs)
	}
	var j admin.ScheduleJob
	r.decode(&j, "schedule", "get", "acme", "invoices")
	if j.Paused || j.Version != "active" || j.NextAt.IsZero() || j.Zone != "Europe/Berlin" {
		t.Fatalf("schedule get: %+v", j)
	}
	pause := []string{"schedule", "pause", "acme", "invoices", "--reason", "month-end freeze"}
	if _, errs, code := r.run("schedule", "pause", "acme", "invoices"); code != cli.ExitUsage || !strings.Contains(errs, "--reason") {
		t.Fatalf("pause without --reason: exit %d %s", code, errs)
	}
	if _, errs, code := r.run(pause...); code != cli.ExitRefused {
		t.Fatalf("pause without --confirm: exit %d %s", code, errs)
	}
	if out, errs, code := r.run(append(pause, "--confirm")...); code != cli.ExitOK || !strings.Contains(out, "applied") {
		t.Fatalf("pause --confirm: exit %d\n%s%s", code, out, errs)
	}
	r.decode(&j, "schedule", "get", "acme", "invoices")
	if !j.Paused {
		t.Fatal("the confirmed pause did not pause the job")
	}
	var ours, theirs int
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT (SELECT count(*) FROM coordctl_audit WHERE action = 'schedule.pause' AND target = 'acme/invoices'),
		(SELECT count(*) FROM coord_schedule_audit WHERE verb = 'pause' AND actor = 'alice@oncall via coordctl')`).Scan(&ours, &theirs); err != nil {
		t.Fatal(err)
	}
	if ours != 1 || theirs != 1 {
		t.Errorf("audit rows: coordctl %d, schedule %d; want 1 and 1", ours, theirs)
	}
	if _, errs, code := r.run("schedule", "trigger", "acme", "invoices", "--reason", "x", "--confirm", "--expect", "active"); code != cli.ExitConflict {
		t.Fatalf("trigger with a stale --expect: exit %d %s", code, errs)
	}
	if _, errs, code := r.run("schedule", "backfill", "acme", "invoices", "--reason", "x", "--confirm", "--from", "yesterday", "--to", "2026-12-01T00:00:00Z"); code != cli.ExitUsage {
		t.Fatalf("backfill with a bad --from: exit %d %s", code, errs)
	}
	if out, errs, code := r.run("schedule", "backfill", "acme", "invoices", "--reason", "November's run", "--confirm",
		"--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z"); code != cli.ExitOK || !strings.Contains(out, "applied") {
		t.Fatalf("backfill: exit %d\n%s%s", code, out, errs)
	}
	if _, _, code := r.run("schedule", "get", "acme", "nope"); code == cli.ExitOK {
		t.Fatal("get of an unknown job succeeded")
	}
}
