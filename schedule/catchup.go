package schedule

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
)

// maxMissRecords bounds the misses one catch-up records row by row (a 10 ms
// job down for a day would write millions): the rest are counted in
// coordkit.schedule.missed and skipped over by the job's last nominal time.
const maxMissRecords = 1000

// miss is a fire that will not run.
type miss struct {
	occurrence
	reason string
}

// plan is what a job's due fires come to under its policies.
type plan struct {
	run      []occurrence
	misses   []miss         // to record, oldest first (at most maxMissRecords)
	counts   map[string]int // every miss, by reason
	advance  time.Time      // the newest miss older than every fire to run: the job's new last nominal time
	newest   *miss          // the miss advance stands for
	buffered *occurrence
	until    time.Time // the gaps up to here are in misses
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (p *plan) add(o occurrence, reason string) {
	p.counts[reason]++
	if len(p.misses) < maxMissRecords {
		p.misses = append(p.misses, miss{o, reason})
	}
}

// planFor applies the job's window, catch-up, DST-gap and overlap policies to
// its fires due by now. The fires to run come oldest first.
func (r *runner) planFor(js *jobState, now time.Time) plan {
	p := plan{counts: map[string]int{}}
	from := r.from(js)
	windowStart := now.Add(-js.Window)
	var due []occurrence
	var dropped []occurrence // due fires pushed out of the bounded list, oldest first
	keep := max(js.MaxCatchUp, 1)
	for o, ok := js.spec.next(from); ok && !o.nominal.After(now); o, ok = js.spec.next(o.nominal) {
		if o.nominal.Before(windowStart) {
			p.add(o, MissedWindow)
			continue
		}
		due = append(due, o)
		if len(due) > keep {
			dropped, due = append(dropped, due[0]), due[1:]
		}
	}
	if len(due) > 1 || len(dropped) > 0 { // a backlog: the catch-up policy decides
		switch js.CatchUp {
		case CatchUpAll:
			for _, o := range dropped {
				p.add(o, MissedLimit)
			}
		case CatchUpLatest:
			for _, o := range append(dropped, due[:len(due)-1]...) {
				p.add(o, MissedSuperseded)
			}
			due = due[len(due)-1:]
		case CatchUpSkip:
			for _, o := range append(dropped, due...) {
				p.add(o, MissedSkipped)
			}
			due = nil
		}
	}
	if len(js.running) > 0 && len(due) > 0 && js.Overlap != OverlapAllow {
		if js.Overlap == OverlapBufferOne {
			if js.buffered != nil {
				p.add(*js.buffered, MissedOverlap)
			}
			b := due[len(due)-1]
			p.buffered, due = &b, due[:len(due)-1]
		}
		for _, o := range due {
			p.add(o, MissedOverlap)
		}
		due = nil
	}
	p.run = due
	for _, m := range p.misses {
		if (len(due) == 0 || m.nominal.Before(due[0].nominal)) && (p.buffered == nil || m.nominal.Before(p.buffered.nominal)) &&
			m.nominal.After(p.advance) {
			m := m
			p.advance, p.newest = m.nominal, &m
		}
	}
	for _, o := range js.spec.gapMisses(maxTime(from, js.gapsUntil), now) {
		p.add(o, MissedDSTGap)
	}
	p.until = now
	return p
}

// due runs a job's fires that are due by now, after recording the ones that
// will not run. It reports whether there was anything to do.
func (r *runner) due(js *jobState, now time.Time) bool {
	if len(js.running) == 0 && js.buffered != nil {
		b := *js.buffered
		js.buffered = nil
		if b.nominal.Before(now.Add(-js.Window)) {
			r.recordMisses(js, plan{misses: []miss{{b, MissedWindow}}, counts: map[string]int{MissedWindow: 1}, advance: b.nominal, newest: &miss{b, MissedWindow}})
		} else {
			r.fire(js, b)
		}
		return true
	}
	o, ok := js.spec.next(r.from(js))
	if !ok || o.nominal.After(now) {
		return false
	}
	p := r.planFor(js, now)
	if len(p.misses) > 0 && !r.recordMisses(js, p) {
		return true // not recorded: try again at the next step
	}
	if p.buffered != nil {
		js.buffered = p.buffered
	}
	for _, o := range p.run {
		if r.ctx.Err() != nil || r.lost || !r.fire(js, o) {
			break
		}
	}
	return true
}

// fire runs one scheduled fire; false when it did not come to a verdict (ctx
// ended, the partition lost).
func (r *runner) fire(js *jobState, o occurrence) bool {
	t := &task{job: js.job, id: ID{Tenant: r.s.cfg.Tenant, Job: js.Name, Local: o.local, Fold: o.fold}, nominal: o.nominal, kind: KindScheduled}
	v, last := r.do(t)
	switch v {
	case committed, duplicate:
		js.advance(o.nominal, last)
	case continued:
		js.advance(o.nominal)
		js.running = append(js.running, t)
	default:
		return false
	}
	return true
}

// recordMisses records p's misses and moves the job's last nominal time to
// p.advance, in a fenced transaction of its own; it counts them. It reports
// whether they were recorded.
func (r *runner) recordMisses(js *jobState, p plan) bool {
	n := len(p.misses)
	locals, folds, nominals, reasons := make([]time.Time, n), make([]int16, n), make([]time.Time, n), make([]string, n)
	for i, m := range p.misses {
		locals[i], folds[i], nominals[i], reasons[i] = m.local, int16(m.fold), m.nominal, m.reason
	}
	adv, advLocal, advFold := js.last, any(nil), any(nil)
	if p.newest != nil && p.advance.After(js.last) {
		adv, advLocal, advFold = p.advance, p.newest.local, int16(p.newest.fold)
	}
	err := r.s.fence.Exec(r.ctx, r.s.pool, r.tok, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, r.s.sql.misses, r.s.cfg.Tenant, js.Name, locals, folds, nominals, reasons, r.tok.String(),
			adv, advLocal, advFold, r.s.cfg.Clock.Now())
		return err
	})
	if errors.Is(err, coord.ErrStaleToken) {
		r.lost = true
		return false
	}
	if err != nil {
		if r.ctx.Err() == nil {
			r.log.Warn("schedule: recording missed fires failed", "job", js.Name, "misses", n, "err", err)
		}
		return false
	}
	for reason, c := range p.counts {
		r.s.in.miss(r.ctx, js.Name, reason, c)
	}
	r.log.Info("schedule: fires missed", "job", js.Name, "by_reason", p.counts)
	js.advance(adv)
	js.gapsUntil = maxTime(js.gapsUntil, p.until)
	return true
}
