package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/console"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

// TestConsoleAtScaleInABrowser (issue 29, points 2 and 3) drives headless
// chromium through what an on-call meets at 5,000 rows: the sagas page in
// pages of 50 with "N of M" and the counts per state, the next page, a search;
// the outbox page filtered to one key, its bulk requeue previewed (the count
// first) and applied (one audit row with its row count); and the stale-page
// indicator when the saga table becomes unreadable, cleared once it is back.
func TestConsoleAtScaleInABrowser(t *testing.T) {
	e := testenv.Seeded(t)
	e.StartMany(t, 120, "batch", "invoice", "running", "")
	e.StartMany(t, 7, "refund", "refund", "needs_human", "ledger: account 9921 is LOCKED")
	const key, parkedN = "invoice-batch-42", 300
	e.ParkMany(t, parkedN, key, "schema registry: subject orders-value not found")
	base := serve(t, e, console.Config{Actor: "carol@oncall (console)"})
	ctx := browser(t)
	shots := t.TempDir()
	must, _ := drive(t, ctx)
	// textOf reads an element's text in one evaluation: a live update
	// between finding a node and reading it cannot detach it under the read.
	textOf := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function(){var el=document.querySelector(`+strconv.Quote(sel)+`);return el?el.innerText.trim():"<missing>";})()`))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	rows := func() int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#sagas tbody input[name=id]").length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Paging: 50 of 129, the counts per state, the next page.
	must("sagas", chromedp.Navigate(base+"/sagas"), chromedp.WaitVisible(chromedp.CSS("#pager")))
	if got, pager := rows(), textOf("#pager"); got != 50 || !strings.Contains(pager, "of 129 sagas") {
		t.Fatalf("sagas page: %d rows, pager %q: want 50 of 129", got, pager)
	}
	if running, human := textOf("#count-running"), textOf("#count-needs_human"); running != "121" || human != "8" {
		t.Fatalf("counts per state: running %q, needs_human %q; want 121 and 8", running, human)
	}
	first := textOf("#sagas tbody tr:first-child td:nth-child(2)")
	must("next page", clickNow("#next"), chromedp.WaitVisible(chromedp.CSS(`#pager a[href="/sagas"]`)))
	if got, second := rows(), textOf("#sagas tbody tr:first-child td:nth-child(2)"); got != 50 || second == first {
		t.Fatalf("the next page: %d rows, first %q (page 1's was %q)", got, second, first)
	}
	shoot(t, ctx, shots, "sagas-paged")

	// Search: by error text, case-insensitive.
	must("search", chromedp.Navigate(base+"/sagas"), chromedp.WaitVisible(chromedp.CSS("#saga-filter")),
		chromedp.SendKeys(chromedp.CSS(`#saga-filter input[name=q]`), "account 9921"),
		chromedp.Click(chromedp.CSS(`#saga-filter button`)),
		chromedp.WaitVisible(chromedp.CSS(`#saga-filter input[name=q][value="account 9921"]`)))
	if got, pager := rows(), textOf("#pager"); got != 7 || !strings.Contains(pager, "of 7 sagas") {
		t.Fatalf("search \"account 9921\": %d rows, pager %q: want the 7 refunds", got, pager)
	}

	// The outbox: filtered to one key, a bulk requeue previewed, then applied.
	must("outbox filtered", chromedp.Navigate(base+"/outbox?key="+key), chromedp.WaitVisible(chromedp.CSS("#requeue-matching")))
	if pager := textOf("#pager"); !strings.Contains(pager, "of 300 parked events") {
		t.Fatalf("outbox filtered to %s: pager %q", key, pager)
	}
	shoot(t, ctx, shots, "outbox-paged")
	must("preview", clickNow("#requeue-matching"), chromedp.WaitVisible(chromedp.CSS("#bulk-count")))
	if n := textOf("#bulk-count"); n != "300" {
		t.Fatalf("the preview's count: %q, want 300", n)
	}
	var parked int
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT count(*) FROM coord_outbox_parked WHERE aggregateid = $1`, key).Scan(&parked); err != nil || parked != parkedN {
		t.Fatalf("after the preview %d are parked (%v): the preview changed something", parked, err)
	}
	shoot(t, ctx, shots, "bulk-preview")
	must("apply", chromedp.SendKeys(chromedp.CSS(`#bulk-confirm input[name=reason]`), "registry subject restored (INC-501)"),
		chromedp.Click(chromedp.CSS("#bulk-apply")), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if out := textOf("#outcome"); !strings.Contains(out, "applied to 300 parked events") {
		t.Fatalf("bulk outcome: %q", out)
	}
	var audits, rowsAudited int
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT count(*), coalesce(sum(rows), 0) FROM coordctl_audit WHERE action = 'outbox.requeue.bulk'
		AND actor = 'carol@oncall (console)' AND via LIKE 'console % (loopback)'`).Scan(&audits, &rowsAudited); err != nil || audits != 1 || rowsAudited != parkedN {
		t.Fatalf("bulk audit: %d rows counting %d (%v): want one row of 300", audits, rowsAudited, err)
	}
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT count(*) FROM coord_outbox_parked WHERE aggregateid = $1`, key).Scan(&parked); err != nil || parked != 0 {
		t.Fatalf("after the bulk requeue %d are still parked (%v)", parked, err)
	}

	// Stale: the saga table becomes unreadable under an open page.
	must("sagas again", chromedp.Navigate(base+"/sagas"), chromedp.WaitVisible(chromedp.CSS("#pager")))
	if _, err := e.DB.Pool.Exec(testenv.Ctx(t), `ALTER TABLE coord_sagas RENAME TO coord_sagas_away`); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if _, err := e.DB.Pool.Exec(context.Background(), `ALTER TABLE coord_sagas_away RENAME TO coord_sagas`); err != nil {
				t.Error(err)
			}
		}
	}
	defer restore()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(sctx, chromedp.Poll[bool](`!document.getElementById("live-stale").hidden && document.getElementById("live-label").textContent === "stale"`)); err != nil {
		t.Fatalf("the page did not say it is stale within 20 s of its table becoming unreadable: %v", err)
	}
	if banner := textOf("#live-stale"); !strings.Contains(banner, "Updates paused") || !strings.Contains(banner, "coord_sagas") {
		t.Fatalf("stale banner: %q: want the pause and the error", banner)
	}
	shoot(t, ctx, shots, "stale")
	restore()
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	if _, err := chromedp.Run(rctx, chromedp.Poll[bool](`document.getElementById("live-stale").hidden && document.getElementById("live-label").textContent === "live"`)); err != nil {
		t.Fatalf("the stale mark did not clear within 20 s of the table coming back: %v", err)
	}
}
