package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MaxBackfill bounds the fires one Backfill may ask for.
const MaxBackfill = 10000

// Kinds of operators' requests (the requests table's kind).
const (
	requestTrigger  = "trigger"
	requestBackfill = "backfill"
)

// Admin is the operators' side of a tenant's schedule, in PostgreSQL only (no
// etcd, no job code): list the jobs with their next and last fires, pause and
// resume a job, trigger a fire now, skip the next fire, backfill a range. Every
// change is audited (who, why, when, what) in the same transaction. A
// Scheduler embeds one. Safe for concurrent use.
type Admin struct {
	*store
	pool *pgxpool.Pool
	cfg  Config
}

// NewAdmin validates cfg (Tenant, Schema, Table and Clock are used) and
// returns the operators' view of its schedule. It does no I/O and does not
// block. It returns a *ConfigError for an invalid field or a nil pool.
func NewAdmin(pool *pgxpool.Pool, cfg Config) (*Admin, error) {
	if pool == nil {
		return nil, &ConfigError{Field: "pool", Reason: "nil *pgxpool.Pool"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newAdmin(pool, cfg)
}

func newAdmin(pool *pgxpool.Pool, cfg Config) (*Admin, error) {
	st, err := newStore(cfg.Schema, cfg.Table)
	if err != nil {
		return nil, err
	}
	return &Admin{store: st, pool: pool, cfg: cfg}, nil
}

// JobStatus is one job as its rows in PostgreSQL show it.
type JobStatus struct {
	Job       string
	Partition int // of Config.Partitions
	Cron      string
	Every     time.Duration
	Zone      string
	Gap       GapPolicy
	Fold      FoldPolicy
	CatchUp   CatchUpPolicy
	Overlap   OverlapPolicy
	Window    time.Duration
	Paused    bool
	// LastNominal is the persisted last nominal time: catch-up starts after it.
	LastNominal time.Time
	// Last is the last scheduled fire that ran or was recorded missed (zero
	// Local before the first).
	Last          ID
	LastOutcome   string // ok, running, failed, missed; "" before the first fire
	LastFireAt    time.Time
	LastSuccessAt time.Time // zero before the first success
	// Next is the next scheduled fire after LastNominal and NextNominal its
	// instant (zero when the expression matches nothing more).
	Next        ID
	NextNominal time.Time
	Running     int // unfinished multi-batch runs
}

const statusColumns = `job, cron, every_ms, zone, gap, fold, catch_up, max_catch_up, window_ms, overlap, paused,
	last_nominal, last_local, last_fold, last_outcome, last_fire_at, last_success_at`

func (a *Admin) scanStatus(row pgx.Row, running *int) (JobStatus, error) {
	var st JobStatus
	var everyMS, windowMS int64
	var maxCatchUp int32
	var gap, fold, catchUp, overlap string
	var lastLocal, lastFire, lastSuccess *time.Time
	var lastFold *int16
	var lastOutcome *string
	dest := []any{&st.Job, &st.Cron, &everyMS, &st.Zone, &gap, &fold, &catchUp, &maxCatchUp, &windowMS, &overlap, &st.Paused,
		&st.LastNominal, &lastLocal, &lastFold, &lastOutcome, &lastFire, &lastSuccess}
	if running != nil {
		dest = append(dest, running)
	}
	if err := row.Scan(dest...); err != nil {
		return st, err
	}
	st.Every, st.Window = time.Duration(everyMS)*time.Millisecond, time.Duration(windowMS)*time.Millisecond
	st.Gap, st.Fold, st.CatchUp, st.Overlap = GapPolicy(gap), FoldPolicy(fold), CatchUpPolicy(catchUp), OverlapPolicy(overlap)
	st.Partition = PartitionOf(st.Job, a.cfg.Partitions)
	st.Last = ID{Tenant: a.cfg.Tenant, Job: st.Job, Local: derefOr(lastLocal, time.Time{})}
	if lastFold != nil {
		st.Last.Fold = int(*lastFold)
	}
	if lastOutcome != nil {
		st.LastOutcome = *lastOutcome
	}
	st.LastFireAt, st.LastSuccessAt = derefOr(lastFire, time.Time{}), derefOr(lastSuccess, time.Time{})
	if s, err := st.spec(); err == nil {
		if o, ok := s.next(st.LastNominal); ok {
			st.Next, st.NextNominal = ID{Tenant: a.cfg.Tenant, Job: st.Job, Local: o.local, Fold: o.fold}, o.nominal
		}
	}
	return st, nil
}

// spec rebuilds the job's schedule from its row.
func (st JobStatus) spec() (*spec, error) {
	j, err := newJob(Job{Name: st.Job, Cron: st.Cron, Every: st.Every, Zone: st.Zone, Gap: st.Gap, Fold: st.Fold,
		Handler: nopHandler})
	if err != nil {
		return nil, err
	}
	return j.spec, nil
}

// List is JobList.
//
// Deprecated: use JobList.
func (a *Admin) List(ctx context.Context) ([]JobStatus, error) { return a.JobList(ctx) }

// JobList returns every job of the tenant, by name, with its last and next
// fires. It blocks for one query; ctx cancels it.
func (a *Admin) JobList(ctx context.Context) ([]JobStatus, error) {
	rows, err := a.pool.Query(ctx, `SELECT `+statusColumns+`, (SELECT count(*)::int FROM `+a.t.fires+` f
		WHERE f.tenant = j.tenant AND f.job = j.job AND f.outcome = 'running') FROM `+a.t.jobs+` j WHERE tenant = $1 ORDER BY job`, a.cfg.Tenant)
	if err != nil {
		return nil, fmt.Errorf("schedule: list jobs: %w", err)
	}
	defer rows.Close()
	var out []JobStatus
	for rows.Next() {
		var running int
		st, err := a.scanStatus(rows, &running)
		if err != nil {
			return nil, fmt.Errorf("schedule: list jobs: %w", err)
		}
		st.Running = running
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("schedule: list jobs: %w", err)
	}
	return out, nil
}

// change runs one audited operator change of job in a transaction: fn
// changes the rows (the job's row is locked) and returns what it did, which
// the audit row records. It returns ErrUnknownJob for a job with no row, and
// a *ConfigError for an empty or oversized actor or reason.
func (a *Admin) change(ctx context.Context, job, verb, actor, reason string, fn func(tx pgx.Tx, st JobStatus) (string, error)) error {
	switch {
	case actor == "" || len(actor) > 256 || !utf8.ValidString(actor):
		return &ConfigError{Field: "actor", Reason: "1 to 256 bytes of UTF-8 required"}
	case reason == "" || len(reason) > 1024 || !utf8.ValidString(reason):
		return &ConfigError{Field: "reason", Reason: "1 to 1,024 bytes of UTF-8 required"}
	}
	return pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		st, err := a.scanStatus(tx.QueryRow(ctx, `SELECT `+statusColumns+` FROM `+a.t.jobs+` WHERE tenant = $1 AND job = $2 FOR UPDATE`,
			a.cfg.Tenant, job), nil)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q in tenant %q", ErrUnknownJob, job, a.cfg.Tenant)
		}
		if err != nil {
			return fmt.Errorf("schedule: %s %s: %w", verb, job, err)
		}
		detail, err := fn(tx, st)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+a.t.audit+` (tenant, job, verb, actor, reason, detail) VALUES ($1, $2, $3, $4, $5, $6)`,
			a.cfg.Tenant, job, verb, actor, reason, detail); err != nil {
			return fmt.Errorf("schedule: audit %s %s: %w", verb, job, err)
		}
		a.cfg.Logger.Warn("schedule: operator change", "verb", verb, "job", job, "actor", actor, "reason", reason, "detail", detail)
		return nil
	})
}

// Pause stops job's scheduled fires until Resume: each one that comes due
// meanwhile is recorded as missed (MissedPaused), effective from the next
// fire (a fire in flight finishes first: the pause waits for it). Manual and
// backfill fires still run. Audited; blocks for one transaction.
func (a *Admin) Pause(ctx context.Context, job, actor, reason string) error {
	return a.setPaused(ctx, job, "pause", actor, reason, true)
}

// Resume ends a Pause. Audited; blocks for one transaction.
func (a *Admin) Resume(ctx context.Context, job, actor, reason string) error {
	return a.setPaused(ctx, job, "resume", actor, reason, false)
}

func (a *Admin) setPaused(ctx context.Context, job, verb, actor, reason string, paused bool) error {
	return a.change(ctx, job, verb, actor, reason, func(tx pgx.Tx, st JobStatus) (string, error) {
		if _, err := tx.Exec(ctx, `UPDATE `+a.t.jobs+` SET paused = $3, updated_at = now() WHERE tenant = $1 AND job = $2`,
			a.cfg.Tenant, job, paused); err != nil {
			return "", fmt.Errorf("schedule: %s %s: %w", verb, job, err)
		}
		return fmt.Sprintf("paused %t -> %t", st.Paused, paused), nil
	})
}

// Trigger asks job's owner for a manual fire now (Kind KindManual, identity
// the current wall-clock time in the job's zone); the owner runs it within
// Config.PollInterval. It returns the request's id. Audited; blocks for one
// transaction.
func (a *Admin) Trigger(ctx context.Context, job, actor, reason string) (int64, error) {
	at := a.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	return a.request(ctx, job, requestTrigger, actor, reason, at, nil)
}

// Backfill asks job's owner to run the scheduled fires with nominal times in
// [from, to) that have no record, or were recorded missed (Kind
// KindBackfill); fires that ran are not run again. At most MaxBackfill fires.
// It returns the request's id. Audited; blocks for one transaction.
func (a *Admin) Backfill(ctx context.Context, job string, from, to time.Time, actor, reason string) (int64, error) {
	if !from.Before(to) {
		return 0, &ConfigError{Field: "from", Reason: "not before to"}
	}
	return a.request(ctx, job, requestBackfill, actor, reason, from, &to)
}

func (a *Admin) request(ctx context.Context, job, kind, actor, reason string, at time.Time, to *time.Time) (id int64, err error) {
	err = a.change(ctx, job, kind, actor, reason, func(tx pgx.Tx, st JobStatus) (string, error) {
		detail := "at " + at.Format(time.RFC3339Nano)
		if to != nil {
			s, err := st.spec()
			if err != nil {
				return "", fmt.Errorf("schedule: backfill %s: %w", job, err)
			}
			n := 0
			for o, ok := s.next(at.Add(-time.Nanosecond)); ok && o.nominal.Before(*to) && n <= MaxBackfill; o, ok = s.next(o.nominal) {
				n++
			}
			if n > MaxBackfill {
				return "", &ConfigError{Field: "to", Reason: "the range holds more than " + strconv.Itoa(MaxBackfill) + " fires"}
			}
			detail = fmt.Sprintf("range [%s, %s): %d scheduled fires", at.Format(time.RFC3339), to.Format(time.RFC3339), n)
		}
		if err := tx.QueryRow(ctx, `INSERT INTO `+a.t.requests+` (tenant, job, kind, at, range_to, actor, reason)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, a.cfg.Tenant, job, kind, at, to, actor, reason).Scan(&id); err != nil {
			return "", fmt.Errorf("schedule: %s %s: %w", kind, job, err)
		}
		return fmt.Sprintf("request %d: %s", id, detail), nil
	})
	return id, err
}

// SkipNext records job's next scheduled fire (the first after its last
// nominal time) as skipped (reason MissedOperator), so it does not run. It
// returns that fire's identity. Audited; blocks for one transaction.
func (a *Admin) SkipNext(ctx context.Context, job, actor, reason string) (id ID, err error) {
	err = a.change(ctx, job, "skip_next", actor, reason, func(tx pgx.Tx, st JobStatus) (string, error) {
		if st.NextNominal.IsZero() {
			return "", fmt.Errorf("schedule: skip next %s: the schedule has no next fire", job)
		}
		// The next fire without a record (an earlier SkipNext may have taken the first).
		s, err := st.spec()
		if err != nil {
			return "", fmt.Errorf("schedule: skip next %s: %w", job, err)
		}
		for o, ok := s.next(st.LastNominal); ok; o, ok = s.next(o.nominal) {
			tag, err := tx.Exec(ctx, `INSERT INTO `+a.t.fires+` (tenant, job, local_time, fold, nominal, kind, outcome, reason, finished_at)
				VALUES ($1, $2, $3, $4, $5, 'scheduled', 'skipped', $6, now()) ON CONFLICT DO NOTHING`,
				a.cfg.Tenant, job, o.local, o.fold, o.nominal, MissedOperator)
			if err != nil {
				return "", fmt.Errorf("schedule: skip next %s: %w", job, err)
			}
			if tag.RowsAffected() == 1 {
				id = ID{Tenant: a.cfg.Tenant, Job: job, Local: o.local, Fold: o.fold}
				return "skipped " + id.String() + " (due " + o.nominal.Format(time.RFC3339) + ")", nil
			}
		}
		return "", fmt.Errorf("schedule: skip next %s: the schedule has no next fire", job)
	})
	return id, err
}
