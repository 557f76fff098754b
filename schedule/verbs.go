package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// change runs one audited operator change of job in a transaction of db (a
// savepoint when db is a pgx.Tx): fn
// changes the rows (the job's row is locked) and returns what it did, which
// the audit row records. It returns ErrUnknownJob for a job with no row, and
// a *ConfigError for an empty or oversized actor or reason.
func (a *Admin) change(ctx context.Context, db Beginner, job, verb, actor, reason string, fn func(tx pgx.Tx, st JobStatus) (string, error)) error {
	switch {
	case actor == "" || len(actor) > 256 || !utf8.ValidString(actor):
		return &ConfigError{Field: "actor", Reason: "1 to 256 bytes of UTF-8 required"}
	case reason == "" || len(reason) > 1024 || !utf8.ValidString(reason):
		return &ConfigError{Field: "reason", Reason: "1 to 1,024 bytes of UTF-8 required"}
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
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
	return a.setPaused(ctx, a.pool, job, "pause", actor, reason, true)
}

// PauseTx is Pause in the caller's transaction tx (a savepoint of it): the
// change and its audit row commit with tx.
func (a *Admin) PauseTx(ctx context.Context, tx pgx.Tx, job, actor, reason string) error {
	return a.setPaused(ctx, tx, job, "pause", actor, reason, true)
}

// Resume ends a Pause. Audited; blocks for one transaction.
func (a *Admin) Resume(ctx context.Context, job, actor, reason string) error {
	return a.setPaused(ctx, a.pool, job, "resume", actor, reason, false)
}

// ResumeTx is Resume in the caller's transaction tx.
func (a *Admin) ResumeTx(ctx context.Context, tx pgx.Tx, job, actor, reason string) error {
	return a.setPaused(ctx, tx, job, "resume", actor, reason, false)
}

func (a *Admin) setPaused(ctx context.Context, db Beginner, job, verb, actor, reason string, paused bool) error {
	return a.change(ctx, db, job, verb, actor, reason, func(tx pgx.Tx, st JobStatus) (string, error) {
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
	return a.TriggerTx(ctx, nil, job, actor, reason)
}

// TriggerTx is Trigger in the caller's transaction tx (nil: one of its own).
func (a *Admin) TriggerTx(ctx context.Context, tx pgx.Tx, job, actor, reason string) (int64, error) {
	at := a.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	return a.request(ctx, a.db(tx), job, requestTrigger, actor, reason, at, nil)
}

// db is tx, or the pool when tx is nil.
func (a *Admin) db(tx pgx.Tx) Beginner {
	if tx == nil {
		return a.pool
	}
	return tx
}

// Backfill asks job's owner to run the scheduled fires with nominal times in
// [from, to) that have no record, or were recorded missed (Kind
// KindBackfill); fires that ran are not run again. At most MaxBackfill fires.
// It returns the request's id. Audited; blocks for one transaction.
func (a *Admin) Backfill(ctx context.Context, job string, from, to time.Time, actor, reason string) (int64, error) {
	return a.BackfillTx(ctx, nil, job, from, to, actor, reason)
}

// BackfillTx is Backfill in the caller's transaction tx (nil: one of its own).
func (a *Admin) BackfillTx(ctx context.Context, tx pgx.Tx, job string, from, to time.Time, actor, reason string) (int64, error) {
	if !from.Before(to) {
		return 0, &ConfigError{Field: "from", Reason: "not before to"}
	}
	return a.request(ctx, a.db(tx), job, requestBackfill, actor, reason, from, &to)
}

func (a *Admin) request(ctx context.Context, db Beginner, job, kind, actor, reason string, at time.Time, to *time.Time) (id int64, err error) {
	err = a.change(ctx, db, job, kind, actor, reason, func(tx pgx.Tx, st JobStatus) (string, error) {
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
func (a *Admin) SkipNext(ctx context.Context, job, actor, reason string) (ID, error) {
	return a.SkipNextTx(ctx, nil, job, actor, reason)
}

// SkipNextTx is SkipNext in the caller's transaction tx (nil: one of its own).
func (a *Admin) SkipNextTx(ctx context.Context, tx pgx.Tx, job, actor, reason string) (id ID, err error) {
	err = a.change(ctx, a.db(tx), job, "skip_next", actor, reason, func(tx pgx.Tx, st JobStatus) (string, error) {
		if st.NextNominal.IsZero() {
			return "", fmt.Errorf("schedule: skip next %s: the schedule has no next fire", job)
		}
		// The next fire without a record (an earlier SkipNext may have taken the first).
		s, err := st.spec()
		if err != nil {
			return "", fmt.Errorf("schedule: skip next %s: %w", job, err)
		}
		n := 0
		for o, ok := s.next(st.LastNominal); ok && n < MaxBackfill; o, ok = s.next(o.nominal) {
			n++
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
