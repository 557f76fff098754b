package schedule

import (
	"fmt"
	"slices"
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"
)

// cronParser reads a standard five-field crontab line (minute hour
// day-of-month month day-of-week) or a descriptor (@hourly, @daily,
// @weekly, @monthly, @yearly), with POSIX cron's rule that a line restricting
// both day fields matches either. github.com/netresearch/go-cron is the
// maintained fork of robfig/cron; only its parser and its field matching are
// used, on civil times (see spec.next): the DST rules are this package's.
var cronParser = cron.MustNewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor | cron.DowOrDom)

// parseCron parses expr into a schedule read on civil times.
func parseCron(expr string) (*cron.SpecSchedule, error) {
	e := strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(e, "@every"):
		return nil, fmt.Errorf("%q: use Job.Every for an interval", expr)
	case strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ="):
		return nil, fmt.Errorf("%q: name the zone in Job.Zone, not in the expression", expr)
	}
	s, err := cronParser.Parse(e)
	if err != nil {
		return nil, err
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%q: not a calendar expression", expr)
	}
	c := *spec
	c.Location = time.UTC // civil arithmetic: no DST
	return &c, nil
}

// occurrence is one fire of a schedule: its identity (the civil time local
// in the job's zone and its fold) and its nominal instant.
type occurrence struct {
	local   time.Time // civil
	fold    int       // 0, or 1 for the second reading of local in an autumn fold
	nominal time.Time // UTC
	shifted bool      // local is in a spring gap; nominal is the gap's end
}

// spec is a job's schedule with its DST policies: either a cron expression
// read in civil time in loc, or a fixed interval of elapsed time.
type spec struct {
	cron  *cron.SpecSchedule
	every time.Duration
	loc   *time.Location
	gap   GapPolicy
	fold  FoldPolicy
}

// cronAfter returns the first civil time after c that the expression
// matches, or the zero time when there is none within its search limit.
func (s *spec) cronAfter(c time.Time) time.Time { return s.cron.Next(c) }

// matches reports whether the expression matches civil time c.
func (s *spec) matches(c time.Time) bool { return s.cronAfter(c.Add(-time.Second)).Equal(c) }

// next returns the first occurrence whose nominal instant is after t. The
// occurrences of a schedule have strictly increasing nominal instants. ok is
// false when the expression has no further match.
func (s *spec) next(t time.Time) (occ occurrence, ok bool) {
	if s.cron == nil {
		n := s.every.Nanoseconds()
		nominal := time.Unix(0, (t.UnixNano()/n+1)*n).UTC()
		local := civil(nominal, s.loc)
		at, _ := resolve(local, s.loc)
		return occurrence{local: local, fold: max(slices.IndexFunc(at, nominal.Equal), 0), nominal: nominal}, true
	}
	start := civil(t, s.loc)
	if foldAhead(t, s.loc) {
		start = start.Add(-maxFold) // a reading before t's may still come, after the clocks go back
	}
	for c := s.cronAfter(start.Add(-time.Second)); !c.IsZero(); c = s.cronAfter(c) {
		if ok && c.After(civil(occ.nominal, s.loc).Add(maxFold)) {
			break // every later reading comes after occ
		}
		for _, o := range s.occurrences(c) {
			if o.nominal.After(t) && (!ok || o.nominal.Before(occ.nominal)) {
				occ, ok = o, true
			}
		}
	}
	return occ, ok
}

// occurrences returns the fires civil time c (a match of the expression)
// gives under the job's DST policies.
func (s *spec) occurrences(c time.Time) []occurrence {
	at, gapEnd := resolve(c, s.loc)
	switch {
	case len(at) == 2 && s.fold == FoldTwice:
		return []occurrence{{local: c, nominal: at[0].UTC()}, {local: c, fold: 1, nominal: at[1].UTC()}}
	case len(at) == 2 && s.fold == FoldLast:
		return []occurrence{{local: c, fold: 1, nominal: at[1].UTC()}}
	case len(at) > 0:
		return []occurrence{{local: c, nominal: at[0].UTC()}}
	case gapEnd.IsZero() || s.gap == GapSkip:
		return nil // GapSkip: counted by gapMisses
	}
	// GapRunAtEnd: the matches inside the gap fire once, at its end, under
	// the first one's identity — unless the end of the gap is a match itself,
	// which then is that one fire.
	if first := s.cronAfter(gapStart(gapEnd, s.loc).Add(-time.Second)); !first.Equal(c) || s.matches(civil(gapEnd, s.loc)) {
		return nil
	}
	return []occurrence{{local: c, nominal: gapEnd.UTC(), shifted: true}}
}

// gapMisses returns, under GapSkip, the matches of the expression that fell
// into a spring gap ending in (from, to]: fires that never happen, each a
// miss with reason MissedDSTGap (identity local, fold 0; nominal the gap's
// end). Under GapRunAtEnd, and for intervals, it returns nothing.
func (s *spec) gapMisses(from, to time.Time) []occurrence {
	if s.cron == nil || s.gap != GapSkip {
		return nil
	}
	var out []occurrence
	for t := from; ; {
		_, end := t.In(s.loc).ZoneBounds()
		if end.IsZero() || end.After(to) {
			return out
		}
		_, before := end.Add(-time.Nanosecond).In(s.loc).Zone()
		if _, after := end.In(s.loc).Zone(); after > before {
			gs, ge := gapStart(end, s.loc), civil(end, s.loc)
			for c := s.cronAfter(gs.Add(-time.Second)); !c.IsZero() && c.Before(ge); c = s.cronAfter(c) {
				out = append(out, occurrence{local: c, nominal: end.UTC(), shifted: true})
			}
		}
		t = end
	}
}
