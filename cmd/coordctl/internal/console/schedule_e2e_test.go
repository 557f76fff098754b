package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/console"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

// TestScheduleInABrowser: the schedule page lists a job with its schedule and
// next fire; Pause, clicked with a reason, pauses it in PostgreSQL, with a row
// in coordctl's audit table and one in the schedule's; a stale form (the job
// resumed by another operator since the page was shown) is refused as a
// conflict — the live update of the other operator's change waits while the
// reason is typed — and nothing is triggered.
func TestScheduleInABrowser(t *testing.T) {
	e := testenv.New(t)
	e.SeedSchedule(t)
	base := serve(t, e, console.Config{Actor: "carol@oncall (console)"})
	ctx := browser(t)
	must, textOf := drive(t, ctx)
	must("schedule page", chromedp.Navigate(base+"/schedule"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
	text := textOf("#jobs")
	for _, want := range []string{"acme/invoices", "0 9 1 * *", "Europe/Berlin", "active", "acme/invoices@"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the jobs table lacks %q:\n%s", want, text)
		}
	}
	shoot(t, ctx, t.TempDir(), "schedule")
	must("click pause",
		chromedp.SendKeys(chromedp.CSS(`form[action$="/invoices/pause"] input[name=reason]`), "month-end freeze (CHG-42)"),
		chromedp.Click(chromedp.CSS("#pause-invoices")), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if text := textOf("#outcome"); !strings.Contains(text, "applied") {
		t.Fatalf("pause outcome: %s", text)
	}
	var paused bool
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT paused FROM coord_schedule WHERE tenant = 'acme' AND job = 'invoices'`).Scan(&paused); err != nil {
		t.Fatal(err)
	}
	if !paused {
		t.Fatal("after Pause the job is not paused in PostgreSQL")
	}
	if n := auditCount(t, e, "schedule.pause", "acme/invoices", "applied"); n != 1 {
		t.Errorf("%d coordctl audit rows for the pause, want 1", n)
	}
	var n int
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT count(*) FROM coord_schedule_audit WHERE verb = 'pause'
		AND actor = 'carol@oncall (console) via coordctl' AND reason = 'month-end freeze (CHG-42)'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d schedule audit rows for the pause, want 1", n)
	}
	// A stale form: the page shows the job paused and the operator types a
	// reason; another operator resumes it; the live update waits while the
	// reason is typed (the bar says so), and the trigger sent from the form
	// shown before is refused. (Typed after the resume, the race with the
	// 300 ms live refresh decided whether the form was stale, fresh or gone.)
	must("page again", chromedp.Navigate(base+"/schedule"), chromedp.WaitVisible(chromedp.CSS("#resume-invoices")),
		chromedp.SendKeys(chromedp.CSS(`form[action$="/invoices/trigger"] input[name=reason]`), "rerun"))
	if _, err := e.Admin.ScheduleChange(testenv.Ctx(t), "acme", "invoices", "resume", time.Time{}, time.Time{},
		admin.Request{Actor: "dave@oncall", Via: "cli", Reason: "freeze lifted", Expect: "paused"}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](`document.getElementById("live-paused").textContent.includes("(1 waiting)")`)); err != nil {
		t.Fatalf("the bar did not say, within 30s of the other operator's resume, that its update waits while the reason is typed: %v", err)
	}
	must("stale trigger", chromedp.Click(chromedp.CSS("#trigger-invoices")), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if text := textOf("#outcome"); !strings.Contains(text, "Refused: the state changed since the page was shown") {
		t.Fatalf("a form shown before another operator's resume was not refused:\n%s", text)
	}
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT count(*) FROM coord_schedule_requests`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d trigger requests (%v) after the refused form, want 0", n, err)
	}
}
