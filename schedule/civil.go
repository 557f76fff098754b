package schedule

import (
	"slices"
	"time"
)

// A civil time is a wall-clock reading (year … nanosecond) without a zone. It
// is held in a time.Time whose Location is time.UTC, by convention only: UTC
// has no DST, so adding to it and comparing it are plain wall-clock arithmetic.
// It names an instant only together with a zone, and in a DST gap it names
// none (resolve).

// civil returns the wall-clock reading of instant t in loc.
func civil(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// maxFold bounds how far a zone's clock is ever set back at once (the
// largest backward shift in the tz database is 2 h; Lord Howe's is 30 min).
const maxFold = 3 * time.Hour

// resolve returns the instants at which loc's clocks read c, earliest first:
// one normally, two in an autumn fold (the first at fold 0, the second at
// fold 1), none in a spring gap — then gapEnd is the first instant after the
// gap (the transition), the moment the clocks jumped over c.
func resolve(c time.Time, loc *time.Location) (at []time.Time, gapEnd time.Time) {
	// Every offset loc uses within ±36 h of c: one of them is c's.
	var offsets []int
	for k := -3; k <= 3; k++ {
		_, off := c.Add(time.Duration(k) * 12 * time.Hour).In(loc).Zone()
		if !slices.Contains(offsets, off) {
			offsets = append(offsets, off)
		}
	}
	for _, off := range offsets {
		t := c.Add(-time.Duration(off) * time.Second)
		if civil(t, loc).Equal(c) && !slices.ContainsFunc(at, t.Equal) {
			at = append(at, t)
		}
	}
	if len(at) > 0 {
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		return at, time.Time{}
	}
	// A gap: some offset puts c after a transition whose clocks jumped from
	// before c to after it; the earliest such transition ends the gap.
	for _, off := range offsets {
		t := c.Add(-time.Duration(off) * time.Second)
		if !civil(t, loc).After(c) {
			continue
		}
		start, _ := t.In(loc).ZoneBounds()
		if start.IsZero() || !civil(start.Add(-time.Nanosecond), loc).Before(c) || civil(start, loc).Before(c) {
			continue
		}
		if gapEnd.IsZero() || start.Before(gapEnd) {
			gapEnd = start
		}
	}
	return nil, gapEnd
}

// gapStart returns the civil time at which the gap ending at instant end
// begins: the reading of the clocks just before they jumped.
func gapStart(end time.Time, loc *time.Location) time.Time {
	_, before := end.Add(-time.Nanosecond).In(loc).Zone()
	return end.Add(time.Duration(before) * time.Second).UTC()
}

// foldAhead reports whether loc's clocks are set back within maxFold after
// t: only then can a civil time earlier than t's reading still lie ahead.
func foldAhead(t time.Time, loc *time.Location) bool {
	_, end := t.In(loc).ZoneBounds()
	if end.IsZero() || end.Sub(t) > maxFold {
		return false
	}
	_, before := end.Add(-time.Nanosecond).In(loc).Zone()
	_, after := end.In(loc).Zone()
	return after < before
}
