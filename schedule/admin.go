package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// JobGet returns one job of the tenant with its last and next fires, read
// through db (a pool, a connection or a transaction). It blocks for one
// query; ctx cancels it. A job with no row is an error matching ErrNotFound.
func (a *Admin) JobGet(ctx context.Context, db DBTX, job string) (JobStatus, error) {
	var running int
	st, err := a.scanStatus(db.QueryRow(ctx, `SELECT `+statusColumns+`, (SELECT count(*)::int FROM `+a.t.fires+` f
		WHERE f.tenant = j.tenant AND f.job = j.job AND f.outcome = 'running') FROM `+a.t.jobs+` j WHERE tenant = $1 AND job = $2`,
		a.cfg.Tenant, job), &running)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("%w: %q in tenant %q", ErrNotFound, job, a.cfg.Tenant)
	}
	if err != nil {
		return st, fmt.Errorf("schedule: get job %s: %w", job, err)
	}
	st.Running = running
	return st, nil
}
