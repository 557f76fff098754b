package schedule

import (
	"context"
	"slices"
	"strconv"
	"time"
)

// poll reads the operators' pending requests for the jobs this process owns,
// every PollInterval, and hands each to its job's runner.
func (s *Scheduler) poll(ctx context.Context) {
	timer := s.cfg.Clock.NewTimer(s.cfg.PollInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		s.pollOnce(ctx)
		timer.Reset(s.cfg.PollInterval)
	}
}

func (s *Scheduler) pollOnce(ctx context.Context) {
	s.mu.Lock()
	owner := map[string]*runner{}
	for _, r := range s.runners {
		for _, js := range r.jobs {
			owner[js.Name] = r
		}
	}
	s.mu.Unlock()
	if len(owner) == 0 {
		return
	}
	names := make([]string, 0, len(owner))
	for n := range owner {
		names = append(names, n)
	}
	slices.Sort(names)
	rows, err := s.pool.Query(ctx, s.sql.pending, s.cfg.Tenant, names)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("schedule: reading the operators' requests failed", "err", err)
		}
		return
	}
	defer rows.Close()
	for rows.Next() {
		var req request
		var to *time.Time
		if err := rows.Scan(&req.id, &req.job, &req.kind, &req.at, &to); err != nil {
			s.cfg.Logger.Warn("schedule: reading a request failed", "err", err)
			return
		}
		req.to = derefOr(to, time.Time{})
		select {
		case owner[req.job].requests <- req:
		default: // full: the next poll sends it again
		}
	}
}

// request carries out an operator's Trigger (a manual fire now) or Backfill
// (the scheduled fires of a range that have no record, or a missed one).
func (r *runner) request(req request) {
	js := r.byName[req.job]
	if js == nil || r.handled[req.id] {
		return
	}
	result := "done"
	switch req.kind {
	case requestTrigger:
		local := civil(req.at, js.spec.loc)
		at, _ := resolve(local, js.spec.loc)
		fold := max(slices.IndexFunc(at, req.at.Equal), 0)
		t := &task{job: js.job, id: ID{Tenant: r.s.cfg.Tenant, Job: js.Name, Local: local, Fold: fold},
			nominal: req.at, kind: KindManual, request: req.id}
		switch v, _ := r.do(t); v {
		case committed:
			r.handled[req.id] = true
			return // the fire's record marked the request done
		case continued:
			r.handled[req.id] = true
			js.running = append(js.running, t)
			return
		case duplicate:
			result = "duplicate"
		default:
			return // ctx ended or the partition lost: the next owner carries it out
		}
	case requestBackfill:
		n := 0
		for o, ok := js.spec.next(req.at.Add(-time.Nanosecond)); ok && o.nominal.Before(req.to); o, ok = js.spec.next(o.nominal) {
			t := &task{job: js.job, id: ID{Tenant: r.s.cfg.Tenant, Job: js.Name, Local: o.local, Fold: o.fold},
				nominal: o.nominal, kind: KindBackfill}
			switch v, _ := r.do(t); v {
			case committed:
				n++
			case continued:
				n++
				js.running = append(js.running, t)
			case duplicate:
			default:
				return
			}
		}
		result = "fired " + strconv.Itoa(n)
	default:
		result = "unknown kind " + req.kind
	}
	if _, err := r.s.pool.Exec(r.ctx, r.s.sql.requestDone, req.id, result); err != nil {
		r.log.Warn("schedule: marking a request done failed", "request", req.id, "err", err)
		return
	}
	r.handled[req.id] = true
}
