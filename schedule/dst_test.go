package schedule

import (
	"fmt"
	"testing"
	"time"
)

// fires lists the occurrences of a schedule with nominal instants in
// [from, to), in order, checking that the instants strictly increase.
func fires(t *testing.T, s *spec, from, to time.Time) []occurrence {
	t.Helper()
	var out []occurrence
	for at := from.Add(-time.Nanosecond); ; {
		o, ok := s.next(at)
		if !ok || !o.nominal.Before(to) {
			return out
		}
		if !o.nominal.After(at) {
			t.Fatalf("next(%s) = %s: not after", at, o.nominal)
		}
		out = append(out, o)
		at = o.nominal
	}
}

func mustSpec(t *testing.T, expr, zone string, gap GapPolicy, fold FoldPolicy) *spec {
	t.Helper()
	j, err := newJob(Job{Name: "j", Cron: expr, Zone: zone, Gap: gap, Fold: fold, Handler: nopHandler})
	if err != nil {
		t.Fatal(err)
	}
	return j.spec
}

// localDay returns the instants of midnight starting civil day d in loc and
// the next one (a civil day may last 23, 24, 25 h, 23.5 h … or not exist).
func localDay(t *testing.T, zone string, y int, m time.Month, d int) (time.Time, time.Time) {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	start := func(c time.Time) time.Time {
		at, end := resolve(c, loc)
		if len(at) > 0 {
			return at[0]
		}
		return end
	}
	c := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	return start(c), start(c.AddDate(0, 0, 1))
}

// TestDSTFireCounts: the exact number of fires of a day (and of the fires
// under their policy) over the DST transitions of four zones: New York and
// Berlin (1 h), Lord Howe (30 min) and Apia (the day skipped in 2011).
func TestDSTFireCounts(t *testing.T) {
	for _, tc := range []struct {
		zone, expr string
		y          int
		m          time.Month
		d          int
		gap        GapPolicy
		fold       FoldPolicy
		want       int // fires with a nominal instant in the local day
		wantGap    int // GapSkip's misses in that day
	}{
		// America/New_York, spring 2026-03-08: 02:00 → 03:00.
		{"America/New_York", "30 2 * * *", 2026, 3, 8, GapRunAtEnd, FoldOnce, 1, 0}, // at 03:00 EDT
		{"America/New_York", "30 2 * * *", 2026, 3, 8, GapSkip, FoldOnce, 0, 1},
		{"America/New_York", "*/15 * * * *", 2026, 3, 8, GapRunAtEnd, FoldOnce, 92, 0}, // 03:00 is a match: 02:xx fold into it
		{"America/New_York", "*/15 * * * *", 2026, 3, 8, GapSkip, FoldOnce, 92, 4},
		{"America/New_York", "0 * * * *", 2026, 3, 8, GapRunAtEnd, FoldOnce, 23, 0},
		{"America/New_York", "10 2,3 * * *", 2026, 3, 8, GapRunAtEnd, FoldOnce, 2, 0}, // 02:10 at 03:00, then 03:10
		// America/New_York, autumn 2026-11-01: 02:00 → 01:00.
		{"America/New_York", "30 1 * * *", 2026, 11, 1, GapRunAtEnd, FoldOnce, 1, 0},
		{"America/New_York", "30 1 * * *", 2026, 11, 1, GapRunAtEnd, FoldLast, 1, 0},
		{"America/New_York", "30 1 * * *", 2026, 11, 1, GapRunAtEnd, FoldTwice, 2, 0},
		{"America/New_York", "*/15 * * * *", 2026, 11, 1, GapRunAtEnd, FoldOnce, 96, 0},
		{"America/New_York", "*/15 * * * *", 2026, 11, 1, GapRunAtEnd, FoldTwice, 100, 0},
		{"America/New_York", "0 * * * *", 2026, 11, 1, GapRunAtEnd, FoldTwice, 25, 0},
		// Europe/Berlin: 2026-03-29 02:00 → 03:00, 2026-10-25 03:00 → 02:00.
		{"Europe/Berlin", "30 2 * * *", 2026, 3, 29, GapRunAtEnd, FoldOnce, 1, 0},
		{"Europe/Berlin", "30 2 * * *", 2026, 3, 29, GapSkip, FoldOnce, 0, 1},
		{"Europe/Berlin", "*/30 * * * *", 2026, 3, 29, GapSkip, FoldOnce, 46, 2},
		{"Europe/Berlin", "30 2 * * *", 2026, 10, 25, GapRunAtEnd, FoldOnce, 1, 0},
		{"Europe/Berlin", "30 2 * * *", 2026, 10, 25, GapRunAtEnd, FoldTwice, 2, 0},
		{"Europe/Berlin", "*/30 * * * *", 2026, 10, 25, GapRunAtEnd, FoldTwice, 50, 0},
		// Australia/Lord_Howe (+10:30 / +11): 2026-10-04 02:00 → 02:30,
		// 2026-04-05 02:00 → 01:30.
		{"Australia/Lord_Howe", "0 2 * * *", 2026, 10, 4, GapRunAtEnd, FoldOnce, 1, 0}, // at 02:30
		{"Australia/Lord_Howe", "15 2 * * *", 2026, 10, 4, GapSkip, FoldOnce, 0, 1},
		{"Australia/Lord_Howe", "*/15 * * * *", 2026, 10, 4, GapRunAtEnd, FoldOnce, 94, 0},
		{"Australia/Lord_Howe", "*/15 * * * *", 2026, 10, 4, GapSkip, FoldOnce, 94, 2},
		{"Australia/Lord_Howe", "45 1 * * *", 2026, 4, 5, GapRunAtEnd, FoldOnce, 1, 0},
		{"Australia/Lord_Howe", "45 1 * * *", 2026, 4, 5, GapRunAtEnd, FoldTwice, 2, 0},
		{"Australia/Lord_Howe", "*/15 * * * *", 2026, 4, 5, GapRunAtEnd, FoldTwice, 98, 0},
		{"Australia/Lord_Howe", "0 * * * *", 2026, 4, 5, GapRunAtEnd, FoldTwice, 24, 0}, // 01:00 and 02:00 are outside the fold [01:30, 02:00)
	} {
		name := fmt.Sprintf("%s %q %d-%02d-%02d gap=%s fold=%s", tc.zone, tc.expr, tc.y, tc.m, tc.d, tc.gap, tc.fold)
		t.Run(name, func(t *testing.T) {
			s := mustSpec(t, tc.expr, tc.zone, tc.gap, tc.fold)
			from, to := localDay(t, tc.zone, tc.y, tc.m, tc.d)
			got := fires(t, s, from, to)
			if len(got) != tc.want {
				t.Errorf("%d fires, want %d: %v", len(got), tc.want, got)
			}
			if misses := s.gapMisses(from, to); len(misses) != tc.wantGap {
				t.Errorf("%d gap misses, want %d: %v", len(misses), tc.wantGap, misses)
			}
			seen := map[string]bool{}
			for _, o := range got {
				id := o.local.Format(time.DateTime) + fmt.Sprint(o.fold)
				if seen[id] {
					t.Errorf("identity %s twice", id)
				}
				seen[id] = true
			}
		})
	}
}

// TestApiaSkippedDay: Samoa skipped Friday 2011-12-30 (23:59:59 on the 29th
// at -10 was followed by 00:00 on the 31st at +14). A daily 09:00 job fires
// on the 28th, 29th, 31st and 1st, and under GapRunAtEnd once more for the
// 30th, at 00:00 on the 31st; under GapSkip the 30th is one miss. An hourly
// job's 24 times of the 30th fold into its 00:00 of the 31st (GapRunAtEnd) or
// are 24 misses (GapSkip).
func TestApiaSkippedDay(t *testing.T) {
	loc, err := time.LoadLocation("Pacific/Apia")
	if err != nil {
		t.Fatal(err)
	}
	from, _ := localDay(t, "Pacific/Apia", 2011, 12, 28)
	_, to := localDay(t, "Pacific/Apia", 2012, 1, 1)
	daily := mustSpec(t, "0 9 * * *", "Pacific/Apia", GapRunAtEnd, FoldOnce)
	got := fires(t, daily, from, to)
	if len(got) != 5 {
		t.Fatalf("daily 09:00, GapRunAtEnd: %d fires, want 5: %v", len(got), got)
	}
	if o := got[2]; o.local != time.Date(2011, 12, 30, 9, 0, 0, 0, time.UTC) || !o.shifted ||
		!o.nominal.Equal(time.Date(2011, 12, 31, 0, 0, 0, 0, loc)) {
		t.Errorf("the 30th's fire: %+v, want identity 2011-12-30 09:00 at 2011-12-31 00:00 +14", o)
	}
	skip := mustSpec(t, "0 9 * * *", "Pacific/Apia", GapSkip, FoldOnce)
	if got, miss := fires(t, skip, from, to), skip.gapMisses(from, to); len(got) != 4 || len(miss) != 1 {
		t.Errorf("daily 09:00, GapSkip: %d fires (want 4), %d misses (want 1)", len(got), len(miss))
	}
	d30, d31 := localDay(t, "Pacific/Apia", 2011, 12, 30)
	if !d30.Equal(d31) {
		t.Fatalf("2011-12-30 lasts %s in Apia, want 0", d31.Sub(d30))
	}
	hourly := mustSpec(t, "0 * * * *", "Pacific/Apia", GapRunAtEnd, FoldOnce)
	hourlySkip := mustSpec(t, "0 * * * *", "Pacific/Apia", GapSkip, FoldOnce)
	f, l := localDay(t, "Pacific/Apia", 2011, 12, 29)
	_, l2 := localDay(t, "Pacific/Apia", 2011, 12, 31)
	if n := len(fires(t, hourly, f, l2)); n != 48 {
		t.Errorf("hourly over the 29th–31st, GapRunAtEnd: %d fires, want 48 (the 30th folds into the 31st's 00:00)", n)
	}
	if n, m := len(fires(t, hourlySkip, f, l2)), len(hourlySkip.gapMisses(f, l2)); n != 48 || m != 24 {
		t.Errorf("hourly over the 29th–31st, GapSkip: %d fires (want 48), %d misses (want 24)", n, m)
	}
	_ = l
}

// TestFiresMatchABruteForceWalk: around every transition of a year of four
// zones, every fire of a
// schedule is a minute whose local reading matches the expression, and every
// such minute (reading, fold) is a fire — under FoldTwice and GapSkip, which
// add and drop nothing.
func TestFiresMatchABruteForceWalk(t *testing.T) {
	checked := 0
	for _, zone := range []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Apia"} {
		for _, expr := range []string{"*/30 * * * *", "15 1,2,3 * * *"} {
			s := mustSpec(t, expr, zone, GapSkip, FoldTwice)
			from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			if zone == "Pacific/Apia" {
				from = time.Date(2011, 6, 1, 0, 0, 0, 0, time.UTC)
			}
			// Three days either side of each transition of the year.
			for tr := from; ; {
				_, end := tr.In(s.loc).ZoneBounds()
				if end.IsZero() || end.After(from.AddDate(1, 0, 0)) {
					break
				}
				tr = end
				lo, hi := end.Add(-72*time.Hour).Truncate(time.Hour), end.Add(72*time.Hour)
				got := fires(t, s, lo, hi)
				var want []occurrence
				folds := map[time.Time]int{}
				for m := lo; m.Before(hi); m = m.Add(time.Minute) {
					c := civil(m, s.loc)
					if s.matches(c) {
						want = append(want, occurrence{local: c, fold: folds[c], nominal: m})
						folds[c]++
					}
				}
				if len(got) != len(want) {
					t.Fatalf("%s %q around %s: %d fires, brute force %d", zone, expr, end, len(got), len(want))
				}
				for i := range got {
					if got[i].local != want[i].local || got[i].fold != want[i].fold || !got[i].nominal.Equal(want[i].nominal) {
						t.Fatalf("%s %q: fire %d = %+v, brute force %+v", zone, expr, i, got[i], want[i])
					}
				}
				checked++
			}
		}
	}
	if checked < 4*2*2-2 {
		t.Errorf("%d transitions checked, want one spring and one autumn per zone and expression", checked)
	}
}

// TestDSTNominalInstants: where the gap and fold fires land, and under which
// identity.
func TestDSTNominalInstants(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	for _, tc := range []struct {
		zone, expr string
		fold       FoldPolicy
		after      string
		local      string
		foldN      int
		nominal    string
	}{
		{"America/New_York", "30 2 * * *", FoldOnce, "2026-03-08T05:00:00Z", "2026-03-08 02:30:00", 0, "2026-03-08T07:00:00Z"},
		{"America/New_York", "30 1 * * *", FoldOnce, "2026-11-01T04:00:00Z", "2026-11-01 01:30:00", 0, "2026-11-01T05:30:00Z"},
		{"America/New_York", "30 1 * * *", FoldLast, "2026-11-01T04:00:00Z", "2026-11-01 01:30:00", 1, "2026-11-01T06:30:00Z"},
		{"America/New_York", "30 1 * * *", FoldTwice, "2026-11-01T05:30:00Z", "2026-11-01 01:30:00", 1, "2026-11-01T06:30:00Z"},
		{"Europe/Berlin", "30 2 * * *", FoldOnce, "2026-03-28T23:00:00Z", "2026-03-29 02:30:00", 0, "2026-03-29T01:00:00Z"},
		{"Australia/Lord_Howe", "0 2 * * *", FoldOnce, "2026-10-03T14:00:00Z", "2026-10-04 02:00:00", 0, "2026-10-03T15:30:00Z"},
		{"Australia/Lord_Howe", "45 1 * * *", FoldTwice, "2026-04-04T14:45:00Z", "2026-04-05 01:45:00", 1, "2026-04-04T15:15:00Z"},
	} {
		s := mustSpec(t, tc.expr, tc.zone, GapRunAtEnd, tc.fold)
		o, ok := s.next(utc(tc.after))
		if !ok || o.local.Format(time.DateTime) != tc.local || o.fold != tc.foldN || !o.nominal.Equal(utc(tc.nominal)) {
			t.Errorf("%s %q %s: next after %s = %s fold %d at %s, want %s fold %d at %s", tc.zone, tc.expr, tc.fold, tc.after,
				o.local.Format(time.DateTime), o.fold, o.nominal.Format(time.RFC3339), tc.local, tc.foldN, tc.nominal)
		}
	}
}
