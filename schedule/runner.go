package schedule

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgtext"
)

// maxWait bounds a runner's sleep, so that a wall-clock step (the nominal
// times are wall-clock times; timers run on the monotonic clock) is noticed.
const maxWait = time.Minute

// runner fires the jobs of one owned partition, one transaction at a time
// (they share the partition's fence row), until its context ends: at the
// partition's revoke or loss.
type runner struct {
	s        *Scheduler
	ctx      context.Context
	tok      coord.Token
	jobs     []*jobState
	byName   map[string]*jobState
	requests chan request
	handled  map[int64]bool // requests carried out (the poller may send one again before it reads it done)
	log      *slog.Logger
	lost     bool // the fence rejected the token: fire nothing more
}

// jobState is a job as its owner runs it.
type jobState struct {
	*job
	last      time.Time   // the job's last nominal time, as persisted
	running   []*task     // unfinished multi-batch runs
	buffered  *occurrence // OverlapBufferOne's waiting fire
	gapsUntil time.Time   // GapSkip's misses up to here are recorded
}

// request is an operator's Trigger or Backfill, read from the requests table.
type request struct {
	id     int64
	job    string
	kind   string
	at, to time.Time
}

func (s *Scheduler) newRunner(ctx context.Context, tok coord.Token, jobs []*job) *runner {
	r := &runner{s: s, ctx: ctx, tok: tok, byName: map[string]*jobState{}, requests: make(chan request, 128),
		handled: map[int64]bool{}, log: s.cfg.Logger.With("tenant", s.cfg.Tenant, "token", tok.String())}
	for _, j := range jobs {
		js := &jobState{job: j}
		r.jobs = append(r.jobs, js)
		r.byName[j.Name] = js
	}
	return r
}

// run loads the jobs' state and fires them until ctx ends.
func (r *runner) run() {
	defer func() {
		for _, js := range r.jobs {
			r.s.in.disown(js.Name)
		}
	}()
	for attempt := 0; r.ctx.Err() == nil; attempt++ {
		err := r.load()
		if err == nil {
			break
		}
		r.log.Warn("schedule: loading the partition's jobs failed; retrying", "err", err)
		if r.s.cfg.Retry.Wait(r.ctx, coord.SystemClock(), attempt) != nil {
			return
		}
	}
	for r.ctx.Err() == nil && !r.lost {
		if !r.step() {
			r.wait()
		}
	}
	<-r.ctx.Done() // a lost partition fires nothing more; its context ends soon
}

// load registers the partition's jobs (their definitions follow the code)
// and reads their state and their unfinished runs, in one round trip.
func (r *runner) load() error {
	now := r.s.cfg.Clock.Now()
	cols := make([][]any, 10)
	names := make([]string, 0, len(r.jobs))
	for _, js := range r.jobs {
		names = append(names, js.Name)
		for i, v := range []any{js.Name, js.Cron, js.Every.Milliseconds(), js.Zone, string(js.Gap), string(js.Fold),
			string(js.CatchUp), int32(js.MaxCatchUp), js.Window.Milliseconds(), string(js.Overlap)} {
			cols[i] = append(cols[i], v)
		}
	}
	args := []any{r.s.cfg.Tenant}
	for _, c := range cols {
		args = append(args, c)
	}
	b := &pgx.Batch{}
	b.Queue(r.s.sql.register, append(args, now)...)
	b.Queue(r.s.sql.load, r.s.cfg.Tenant, names)
	b.Queue(r.s.sql.running, r.s.cfg.Tenant, names)
	br := r.s.pool.SendBatch(r.ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var paused bool
		var last time.Time
		var success *time.Time
		if err := rows.Scan(&name, &paused, &last, &success); err != nil {
			return err
		}
		if js := r.byName[name]; js != nil {
			js.last = last
			r.s.in.own(name, derefOr(success, now))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	for rows.Next() {
		t := &task{kind: KindScheduled}
		var name, kind string
		var batches int32
		if err := rows.Scan(&name, &t.id.Local, &t.id.Fold, &t.nominal, &kind, &batches, &t.cursor); err != nil {
			return err
		}
		if js := r.byName[name]; js != nil {
			t.job, t.kind, t.batch = js.job, Kind(kind), int(batches)
			t.id.Tenant, t.id.Job = r.s.cfg.Tenant, name
			js.running = append(js.running, t)
			r.log.Info("schedule: resuming an unfinished run", "fire", t.id.String(), "batch", t.batch)
		}
	}
	return rows.Err()
}

func derefOr(p *time.Time, v time.Time) time.Time {
	if p == nil {
		return v
	}
	return *p
}

// step runs what is due: one batch of each unfinished run, each job's due
// fires, one request. It reports whether it did anything.
func (r *runner) step() bool {
	worked := false
	for _, js := range r.jobs {
		if r.ctx.Err() != nil || r.lost {
			return false
		}
		if len(js.running) > 0 {
			t := js.running[0]
			js.running = js.running[1:]
			if v, _ := r.do(t); v == continued || (v == retry && r.ctx.Err() == nil) {
				js.running = append(js.running, t)
			}
			worked = true
		}
		worked = r.due(js, r.s.cfg.Clock.Now()) || worked
	}
	select {
	case req := <-r.requests:
		r.request(req)
		worked = true
	default:
	}
	return worked
}

// wait sleeps until the next fire of any job, a request, or ctx's end.
func (r *runner) wait() {
	now := r.s.cfg.Clock.Now()
	d := maxWait
	for _, js := range r.jobs {
		if o, ok := js.spec.next(r.from(js)); ok {
			d = min(d, o.nominal.Sub(now))
		}
	}
	if d <= 0 {
		return
	}
	timer := r.s.cfg.Clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.ctx.Done():
	case <-timer.C():
	case req := <-r.requests:
		r.request(req)
	}
}

// from is where a job's next fires are looked for: after its last nominal
// time, and after the fire waiting in its overlap buffer.
func (r *runner) from(js *jobState) time.Time {
	if js.buffered != nil && js.buffered.nominal.After(js.last) {
		return js.buffered.nominal
	}
	return js.last
}

// do runs t to a verdict: a fire (or batch) that the database refuses for a
// retryable reason is tried again after a backoff; a handler that fails
// Job.MaxAttempts times has its fire recorded as failed. It returns retry
// only when ctx ended, stale when the fence rejected the token.
func (r *runner) do(t *task) (verdict, time.Time) {
	failures := 0
	for n := 0; ; n++ {
		v, last, handlerFailed, err := r.s.execute(r.ctx, r.tok, t, failures+1)
		switch {
		case v == stale:
			r.lost = true
			r.log.Warn("schedule: the fence rejected this scheduler's token: the partition has a newer owner; firing nothing more", "fire", t.id.String(), "err", err)
			return v, last
		case v == duplicate:
			r.log.Debug("schedule: fire recorded already; not run again", "fire", t.id.String(), "batch", t.batch)
			return v, last
		case v != retry:
			return v, last
		case r.ctx.Err() != nil:
			return retry, last
		case handlerFailed:
			failures++
			r.log.Warn("schedule: handler failed", "fire", t.id.String(), "attempt", failures, "err", err)
			if failures >= t.job.MaxAttempts && t.failed == "" {
				t.failed = pgtext.Clean(err.Error(), 1024) // storable: valid UTF-8, no NUL
				continue
			}
		case errors.Is(err, ErrUnknownJob) || !retryable(err):
			r.log.Warn("schedule: fire failed; retrying", "fire", t.id.String(), "err", err)
		}
		if r.s.cfg.Retry.Wait(r.ctx, coord.SystemClock(), min(n, 16)) != nil {
			return retry, last
		}
	}
}

// advance moves a job's last nominal time forward (never back).
func (js *jobState) advance(ts ...time.Time) {
	for _, t := range ts {
		if t.After(js.last) {
			js.last = t
		}
	}
}
