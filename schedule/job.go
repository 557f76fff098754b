package schedule

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
)

// Handler runs one fire of a job (or one batch of it, see Fire.Continue)
// inside the fire's transaction tx, fenced by the partition's token: write the
// effect with tx and do not commit it. The fire record, the job's last nominal
// time and tx's writes commit together, or none of them does. An effect
// outside PostgreSQL passes f.Key() along (an outbox event, an idempotency
// key, a payment provider's Idempotency-Key header) so that its receiver
// deduplicates. ctx ends when the partition is lost or Job.Timeout passes. A
// returned error rolls tx back; the fire is retried (Job.MaxAttempts) and then
// recorded as failed.
type Handler func(ctx context.Context, tx pgx.Tx, f *Fire) error

// Job is a job declared in code: what runs, when, in which time zone, and what
// happens to fires that could not run on time.
type Job struct {
	// Name identifies the job in its tenant (coord.ValidateName rules).
	// Required. It also picks the job's ownership partition.
	Name string
	// Cron is a standard five-field crontab expression (minute hour
	// day-of-month month day-of-week) or a descriptor (@hourly, @daily,
	// @weekly, @monthly, @yearly), read as wall-clock time in Zone. Exactly
	// one of Cron and Every is required.
	Cron string
	// Every is a fixed interval of elapsed time (fires at the multiples of
	// Every since the Unix epoch); DST does not apply to it. At least
	// MinEvery, a whole number of milliseconds.
	Every time.Duration
	// Zone is the IANA time zone Cron is read in ("Europe/Berlin"); fire
	// identities carry the local time in it. Default "UTC".
	Zone string
	// Gap says what a Cron time inside a spring-forward gap does. Default
	// GapRunAtEnd.
	Gap GapPolicy
	// Fold says which readings of a Cron time that an autumn fold repeats
	// fire. Default FoldOnce.
	Fold FoldPolicy
	// CatchUp says which fires due while no scheduler ran the job are run
	// once one does. Default CatchUpAll.
	CatchUp CatchUpPolicy
	// MaxCatchUp bounds the fires CatchUpAll runs at once. Default
	// DefaultMaxCatchUp.
	MaxCatchUp int
	// Window is how late a fire may start: a fire not started by its nominal
	// time plus Window is missed (MissedWindow), whatever CatchUp says.
	// Default DefaultWindow.
	Window time.Duration
	// Overlap says what a fire that becomes due while one of the job's
	// multi-batch runs (Fire.Continue) is unfinished does. It is kept in
	// PostgreSQL with the job. Default OverlapSkip.
	Overlap OverlapPolicy
	// Timeout bounds one call of Handler. Default DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts bounds the calls of Handler for one fire (or batch) that
	// returns errors, before the fire is recorded as failed. Default
	// DefaultMaxAttempts.
	MaxAttempts int
	// Handler runs the fire. Required.
	Handler Handler
}

// GapPolicy is what a job does with a Cron time that a spring-forward DST
// transition skips (02:30 on the night the clocks go from 02:00 to 03:00).
type GapPolicy string

// Gap policies.
const (
	// GapRunAtEnd: the Cron times inside the gap fire once, at its end (the
	// first instant after it), under the identity of the first of them —
	// unless the end of the gap is a Cron time itself (03:00 for an hourly
	// job), which then is the one fire. The default.
	GapRunAtEnd GapPolicy = "run_at_end"
	// GapSkip: the Cron times inside the gap do not fire; each is counted
	// and recorded as missed (MissedDSTGap).
	GapSkip GapPolicy = "skip"
)

// FoldPolicy is what a job does with a Cron time that an autumn DST
// transition repeats (01:30 on the night the clocks go from 02:00 back to
// 01:00 happens twice, an hour apart).
type FoldPolicy string

// Fold policies.
const (
	// FoldOnce: the first reading fires (fold 0), the second does not. The
	// default.
	FoldOnce FoldPolicy = "once"
	// FoldLast: only the second reading fires (fold 1).
	FoldLast FoldPolicy = "last"
	// FoldTwice: both readings fire, as two fires (folds 0 and 1).
	FoldTwice FoldPolicy = "twice"
)

// CatchUpPolicy is what a job does when a scheduler finds more than one fire
// due at once: the job's schedulers were paused, down or cut off for longer
// than an interval. Fires older than the Window are missed in every case.
type CatchUpPolicy string

// Catch-up policies.
const (
	// CatchUpAll runs the due fires oldest first, at most MaxCatchUp of them
	// (the newest); the older ones are missed (MissedLimit). The default.
	CatchUpAll CatchUpPolicy = "all"
	// CatchUpLatest runs the newest due fire only; the others are missed
	// (MissedSuperseded).
	CatchUpLatest CatchUpPolicy = "latest"
	// CatchUpSkip runs none of them (MissedSkipped): the job goes on at its
	// next time.
	CatchUpSkip CatchUpPolicy = "skip"
)

// OverlapPolicy is what a job does with a fire that becomes due while one of
// its multi-batch runs is unfinished.
type OverlapPolicy string

// Overlap policies.
const (
	// OverlapSkip: the new fire is missed (MissedOverlap). The default.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapBufferOne: the newest due fire waits and runs when the run
	// finishes; an older waiting one is missed (MissedOverlap).
	OverlapBufferOne OverlapPolicy = "buffer_one"
	// OverlapAllow: the new fire runs beside the unfinished one.
	OverlapAllow OverlapPolicy = "allow"
)

// Reasons a fire is missed: the coordkit.reason attribute of coordkit.schedule.missed and
// the reason recorded with the fire.
const (
	MissedWindow     = "window"     // not started within Job.Window of its nominal time
	MissedLimit      = "limit"      // CatchUpAll: beyond MaxCatchUp
	MissedSuperseded = "superseded" // CatchUpLatest: a newer fire was due
	MissedSkipped    = "skipped"    // CatchUpSkip
	MissedOverlap    = "overlap"    // OverlapSkip, or pushed out of OverlapBufferOne's buffer
	MissedDSTGap     = "dst_gap"    // GapSkip: a Cron time the clocks skipped
	MissedPaused     = "paused"     // due while an operator had paused the job
	MissedOperator   = "operator"   // an operator's SkipNext
)

// Kind says why a fire runs.
type Kind string

// Kinds of fires.
const (
	KindScheduled Kind = "scheduled" // its time came
	KindManual    Kind = "manual"    // an operator's Trigger
	KindBackfill  Kind = "backfill"  // an operator's Backfill of a range
)

func nopHandler(context.Context, pgx.Tx, *Fire) error { return nil }

// job is a registered job with its parsed schedule and defaults applied.
type job struct {
	Job
	spec      *spec
	partition int
}

// newJob validates j (defaults applied) and parses its schedule.
func newJob(j Job) (*job, error) {
	j = j.withDefaults()
	if err := coord.ValidateName("Name", j.Name, coord.MaxNameLen); err != nil {
		return nil, &JobError{Job: j.Name, Field: "Name", Reason: err.Error(), Err: err}
	}
	bad := func(field, reason string) (*job, error) {
		return nil, &JobError{Job: j.Name, Field: field, Reason: reason}
	}
	loc, err := time.LoadLocation(j.Zone)
	if err != nil {
		return nil, &JobError{Job: j.Name, Field: "Zone", Reason: err.Error(), Err: err}
	}
	s := &spec{loc: loc, gap: j.Gap, fold: j.Fold, every: j.Every}
	switch {
	case (j.Cron == "") == (j.Every == 0):
		return bad("Cron", "exactly one of Cron and Every is required")
	case j.Every != 0 && (j.Every < MinEvery || j.Every%time.Millisecond != 0):
		return bad("Every", fmt.Sprintf("%s: at least %s, a whole number of milliseconds", j.Every, MinEvery))
	case j.Handler == nil:
		return bad("Handler", "nil")
	case j.Gap != GapRunAtEnd && j.Gap != GapSkip:
		return bad("Gap", fmt.Sprintf("unknown policy %q", j.Gap))
	case j.Fold != FoldOnce && j.Fold != FoldLast && j.Fold != FoldTwice:
		return bad("Fold", fmt.Sprintf("unknown policy %q", j.Fold))
	case j.CatchUp != CatchUpAll && j.CatchUp != CatchUpLatest && j.CatchUp != CatchUpSkip:
		return bad("CatchUp", fmt.Sprintf("unknown policy %q", j.CatchUp))
	case j.Overlap != OverlapSkip && j.Overlap != OverlapBufferOne && j.Overlap != OverlapAllow:
		return bad("Overlap", fmt.Sprintf("unknown policy %q", j.Overlap))
	case j.MaxCatchUp < 1 || j.MaxAttempts < 1 || j.Window <= 0 || j.Timeout <= 0:
		return bad("MaxCatchUp", "MaxCatchUp, MaxAttempts, Window and Timeout must be positive")
	}
	if j.Cron != "" {
		if s.cron, err = parseCron(j.Cron); err != nil {
			return nil, &JobError{Job: j.Name, Field: "Cron", Reason: err.Error(), Err: err}
		}
		if _, ok := s.next(time.Now()); !ok {
			return bad("Cron", fmt.Sprintf("%q matches no time in the next years", j.Cron))
		}
	}
	return &job{Job: j, spec: s}, nil
}

func (j Job) withDefaults() Job {
	j.Zone = cmp.Or(j.Zone, DefaultZone)
	j.Gap = cmp.Or(j.Gap, GapRunAtEnd)
	j.Fold = cmp.Or(j.Fold, FoldOnce)
	j.CatchUp = cmp.Or(j.CatchUp, CatchUpAll)
	j.Overlap = cmp.Or(j.Overlap, OverlapSkip)
	j.MaxCatchUp = cmp.Or(j.MaxCatchUp, DefaultMaxCatchUp)
	j.Window = cmp.Or(j.Window, DefaultWindow)
	j.Timeout = cmp.Or(j.Timeout, DefaultTimeout)
	j.MaxAttempts = cmp.Or(j.MaxAttempts, DefaultMaxAttempts)
	return j
}
