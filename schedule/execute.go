package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/internal/pgerr"
)

// task is one transaction to run for a job: a fire, the next batch of a
// multi-batch run, or the record of a fire that failed every attempt.
type task struct {
	job     *job
	id      ID
	nominal time.Time
	kind    Kind
	batch   int
	cursor  []byte
	request int64  // the operator's request this fire carries out; 0: none
	failed  string // set: record the fire as failed, without calling the handler
}

// verdict is what one transaction of a task came to.
type verdict int

const (
	committed verdict = iota // the fire (or batch) committed, or was recorded (missed while paused, failed)
	continued                // a batch committed and the handler asked for another
	duplicate                // the identity (or batch) was recorded already: nothing ran
	stale                    // the fence rejected the partition's token: the partition is lost
	retry                    // busy fence row, failed handler, unknown commit, a database error: try again
)

// division_by_zero: a record statement's assertOne found the record written
// already.
const divisionByZero = "22012"

// execute runs one transaction of t, fenced by tok: BEGIN, the fence's guard
// and the rider in one round trip, the handler, then the record and COMMIT in
// one more. last is the job's last nominal time as the rider read it (zero
// when it did not run). A retry verdict comes with the error; handlerFailed
// says the handler (not the database) returned it.
func (s *Scheduler) execute(ctx context.Context, tok coord.Token, t *task, attempt int) (v verdict, last time.Time, handlerFailed bool, err error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return retry, last, false, fmt.Errorf("schedule: acquire a connection: %w", err)
	}
	defer pc.Release()
	var (
		paused  bool
		outcome *string
		batches *int32
	)
	ft := &fireTx{conn: pc.Conn(), rider: &rider{
		sql:  s.sql.rider,
		args: []any{s.cfg.Tenant, t.job.Name, t.id.Local, t.id.Fold},
		dest: []any{&paused, &last, &outcome, &batches},
	}}
	defer ft.rollback(ctx)
	if err := s.fence.GuardTx(ctx, ft, tok); err != nil {
		if errors.Is(err, coord.ErrStaleToken) {
			s.in.duplicate(ctx, t.job.Name, "fence")
			return stale, last, false, err
		}
		return retry, last, false, err // pgfence.ErrBusy, ctx, the database
	}
	if err := ft.rider.err; err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("%w: %s (not registered in %s)", ErrUnknownJob, t.job.Name, s.t.jobs)
		}
		return retry, last, false, err
	}
	if t.isDuplicate(last, outcome, batches) {
		ft.rollback(ctx)
		if *outcome == "skipped" && t.batch == 0 {
			s.in.miss(ctx, t.job.Name, MissedOperator, 1) // an operator's SkipNext, not a duplicate
		} else {
			s.in.duplicate(ctx, t.job.Name, "key")
		}
		return duplicate, last, false, nil
	}
	f := &Fire{ID: t.id, Nominal: t.nominal, Kind: t.kind, Token: tok, Attempt: attempt, Batch: t.batch, Cursor: t.cursor}
	result, reason := "ok", (*string)(nil)
	switch {
	case t.failed != "":
		result, reason = "failed", &t.failed
	case paused && t.kind == KindScheduled && t.batch == 0:
		r := MissedPaused
		result, reason = "missed", &r
	default:
		if err := call(ctx, t.job, ft, f); err != nil {
			ft.rollback(ctx)
			return retry, last, true, err
		}
		if f.more {
			result = "running"
		}
	}
	now := s.cfg.Clock.Now()
	if t.batch == 0 {
		err = ft.recordAndCommit(ctx, s.sql.record, s.cfg.Tenant, t.job.Name, t.id.Local, t.id.Fold, t.nominal, string(t.kind),
			result, reason, tok.String(), 1, f.next, attempt, now, t.request)
	} else {
		err = ft.recordAndCommit(ctx, s.sql.recordBatch, s.cfg.Tenant, t.job.Name, t.id.Local, t.id.Fold, t.batch,
			result, f.next, tok.String(), now)
	}
	switch {
	case pgerr.Code(err) == divisionByZero:
		s.in.duplicate(ctx, t.job.Name, "key")
		return duplicate, last, false, nil
	case err != nil:
		return retry, last, false, err
	}
	done := s.cfg.Clock.Now()
	s.in.fired(ctx, t.job.Name, result)
	switch result {
	case "missed":
		s.in.miss(ctx, t.job.Name, MissedPaused, 1)
	case "ok", "running":
		s.in.succeeded(t.job.Name, done)
	}
	if t.kind == KindScheduled && t.batch == 0 && result != "missed" {
		s.in.lagged(ctx, t.job.Name, done.Sub(t.nominal))
	}
	if f.more {
		t.batch, t.cursor = t.batch+1, f.next
		return continued, last, false, nil
	}
	return committed, last, false, nil
}

// isDuplicate reports whether what the rider read shows t done already: its
// batch committed, its identity recorded (a backfill may run a missed one).
// outcome is not nil when it returns true.
func (t *task) isDuplicate(last time.Time, outcome *string, batches *int32) bool {
	switch {
	case t.batch > 0:
		return outcome != nil && (*outcome != "running" || batches == nil || int(*batches) != t.batch)
	case t.kind == KindBackfill:
		return outcome != nil && *outcome != "missed"
	}
	return outcome != nil
}

// call runs the job's handler, bounded by its Timeout; a panic is its error.
func call(ctx context.Context, j *job, tx pgx.Tx, f *Fire) (err error) {
	ctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("schedule: handler of %s panicked: %v", f.ID, r)
		}
	}()
	if err := j.Handler(ctx, tx, f); err != nil {
		return fmt.Errorf("schedule: handler of %s: %w", f.ID, err)
	}
	return nil
}

// retryable reports whether a retry verdict's error is worth another attempt
// without counting against Job.MaxAttempts: the fence row was busy, or the
// commit's outcome is unknown (a retry finds the record, or commits it).
func retryable(err error) bool {
	return errors.Is(err, pgfence.ErrBusy) || errors.Is(err, errCommitUnknown) || coord.Retryable(err)
}
