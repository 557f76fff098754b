package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/schedule"
)

// ScheduleJob is one job of package schedule as its rows in PostgreSQL show
// it: its schedule, its last and next fires, paused or not.
type ScheduleJob struct {
	Tenant        string    `json:"tenant"`
	Job           string    `json:"job"`
	Schedule      string    `json:"schedule"` // the cron expression, or "every 1m0s"
	Zone          string    `json:"zone"`
	Policies      string    `json:"policies"` // catch-up, window, overlap, gap, fold
	Paused        bool      `json:"paused"`
	LastFire      string    `json:"last_fire"` // its identity; "" before the first
	LastOutcome   string    `json:"last_outcome"`
	LastFireAt    time.Time `json:"last_fire_at,omitzero"`
	LastSuccessAt time.Time `json:"last_success_at,omitzero"`
	NextFire      string    `json:"next_fire"`
	NextAt        time.Time `json:"next_at,omitzero"`
	Running       int       `json:"running"` // unfinished multi-batch runs
	// Version is what a change compares: paused or active (a fire moving the
	// job on is no reason to refuse a pause).
	Version string `json:"version"`
}

// String is the job in one line (the result page of a change).
func (j ScheduleJob) String() string {
	state := "active"
	if j.Paused {
		state = "paused"
	}
	return fmt.Sprintf("%s/%s (%s, %s): last %s %s, next %s", j.Tenant, j.Job, j.Schedule, state, orDash(j.LastFire), j.LastOutcome, orDash(j.NextFire))
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// ScheduleVerbs are the changes `schedule` offers, as coordctl names them.
var ScheduleVerbs = []string{"pause", "resume", "trigger", "skip-next", "backfill"}

func (a *Admin) scheduleAdmin(ctx context.Context, tenant string) (*schedule.Admin, error) {
	pool, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	return schedule.NewAdmin(pool, schedule.Config{Tenant: tenant, Schema: a.cfg.Schema, Logger: a.log})
}

func scheduleJob(tenant string, st schedule.JobStatus) ScheduleJob {
	j := ScheduleJob{Tenant: tenant, Job: st.Job, Schedule: st.Cron, Zone: st.Zone, Paused: st.Paused, LastOutcome: st.LastOutcome,
		LastFireAt: st.LastFireAt, LastSuccessAt: st.LastSuccessAt, NextAt: st.NextNominal, Running: st.Running, Version: "active",
		Policies: fmt.Sprintf("catch-up %s, window %s, overlap %s, gap %s, fold %s", st.CatchUp, st.Window, st.Overlap, st.Gap, st.Fold)}
	if st.Every != 0 {
		j.Schedule = "every " + st.Every.String()
	}
	if !st.Last.Local.IsZero() {
		j.LastFire = st.Last.String()
	}
	if !st.NextNominal.IsZero() {
		j.NextFire = st.Next.String()
	}
	if st.Paused {
		j.Version = "paused"
	}
	return j
}

// ScheduleJobList returns the jobs of tenant ("" = every tenant), by tenant
// and name.
func (a *Admin) ScheduleJobList(ctx context.Context, tenant string) ([]ScheduleJob, error) {
	tenants := []string{tenant}
	if tenant == "" {
		pool, err := a.db(ctx)
		if err != nil {
			return nil, err
		}
		table := pgx.Identifier{schedule.DefaultTable}
		if a.cfg.Schema != "" {
			table = pgx.Identifier{a.cfg.Schema, schedule.DefaultTable}
		}
		rows, err := pool.Query(ctx, `SELECT DISTINCT tenant FROM `+table.Sanitize()+` ORDER BY 1`)
		if err != nil {
			return nil, fmt.Errorf("coordctl: schedule tenants: %w", err)
		}
		if tenants, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return nil, fmt.Errorf("coordctl: schedule tenants: %w", err)
		}
	}
	var out []ScheduleJob
	for _, t := range tenants {
		sa, err := a.scheduleAdmin(ctx, t)
		if err != nil {
			return nil, err
		}
		sts, err := sa.JobList(ctx)
		if err != nil {
			return nil, err
		}
		for _, st := range sts {
			out = append(out, scheduleJob(t, st))
		}
	}
	return out, nil
}

// ScheduleJobGet returns one job; ErrNotFound when it has no row.
func (a *Admin) ScheduleJobGet(ctx context.Context, tenant, job string) (ScheduleJob, error) {
	sa, err := a.scheduleAdmin(ctx, tenant)
	if err != nil {
		return ScheduleJob{}, err
	}
	pool, err := a.db(ctx)
	if err != nil {
		return ScheduleJob{}, err
	}
	st, err := sa.JobGet(ctx, pool, job)
	if errors.Is(err, schedule.ErrNotFound) {
		return ScheduleJob{}, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return scheduleJob(tenant, st), err
}

// ScheduleChange applies one verb of ScheduleVerbs to a job (backfill takes
// the range [from, to)), through the schedule package's audited verb in the
// same transaction as coordctl's audit row; compare-and-set on the version
// shown (paused or active).
func (a *Admin) ScheduleChange(ctx context.Context, tenant, job, verb string, from, to time.Time, req Request) (Change, error) {
	sa, err := a.scheduleAdmin(ctx, tenant)
	if err != nil {
		return Change{}, err
	}
	if verb == "backfill" && !from.Before(to) {
		return Change{}, &ArgError{Arg: "from", Reason: "a backfill needs --from before --to"}
	}
	read := func(ctx context.Context, tx pgx.Tx) (any, string, error) {
		st, err := sa.JobGet(ctx, tx, job)
		if errors.Is(err, schedule.ErrNotFound) {
			return nil, "", fmt.Errorf("%w: %v", ErrNotFound, err)
		}
		j := scheduleJob(tenant, st)
		return j, j.Version, err
	}
	return a.mutate(ctx, op{
		action: "schedule." + verb, target: tenant + "/" + job,
		lock: read,
		gone: func(err error) bool { return errors.Is(err, ErrNotFound) },
		apply: func(ctx context.Context, tx pgx.Tx, _ any) error {
			actor := req.Actor + " via coordctl"
			switch verb {
			case "pause":
				return sa.PauseTx(ctx, tx, job, actor, req.Reason)
			case "resume":
				return sa.ResumeTx(ctx, tx, job, actor, req.Reason)
			case "trigger":
				_, err := sa.TriggerTx(ctx, tx, job, actor, req.Reason)
				return err
			case "skip-next":
				_, err := sa.SkipNextTx(ctx, tx, job, actor, req.Reason)
				return err
			case "backfill":
				_, err := sa.BackfillTx(ctx, tx, job, from, to, actor, req.Reason)
				return err
			}
			return &ArgError{Arg: "verb", Reason: strconv.Quote(verb) + " is none of " + strings.Join(ScheduleVerbs, ", ")}
		},
		after: func(ctx context.Context, tx pgx.Tx) (any, error) {
			j, _, err := read(ctx, tx)
			return j, err
		},
	}, req)
}
