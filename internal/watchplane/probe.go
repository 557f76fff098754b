package watchplane

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// minProbeGap bounds how often Sync callers can make the plane probe (a
// consistent read costs one revision read: many Syncs in a row, as many caches
// started one after another, each wait about one round trip); failedProbeGap
// while the probes fail (etcd unreachable: no hot loop).
const (
	minProbeGap    = 5 * time.Millisecond
	failedProbeGap = 100 * time.Millisecond
)

// progressRetry is how long the plane relies on the fallback comparison once
// progress requests went unanswered progressStrikes probes in a row (etcd's
// grpc-proxy does not forward them; a single miss is a watcher etcd had not
// synced yet).
const (
	progressRetry   = 5 * time.Minute
	progressStrikes = 3
)

// progressWait bounds the wait for a progress notification: it comes back in a
// round trip, and a probe must not hold up the next one.
const progressWait = 500 * time.Millisecond

// maintain is the plane's housekeeping loop: it probes every root's freshness
// at the smallest interval any subscriber asks for (at once while a Sync
// waits), presumes a root unconfirmed for its ResetAfter hung, and closes roots
// that have had no subscriber for IdleTimeout.
func (p *Plane) maintain() {
	defer p.wg.Done()
	clk := p.cfg.Clock
	t := clk.NewTimer(time.Hour)
	defer t.Stop()
	var last, noProgressUntil time.Time
	strikes, gap := 0, minProbeGap
	for {
		roots := p.rootList()
		interval := DefaultProbeInterval
		var idleAt time.Time
		for _, r := range roots {
			interval = min(interval, r.needs().probe)
			r.mu.Lock()
			if !r.idleSince.IsZero() && (idleAt.IsZero() || r.idleSince.Before(idleAt)) {
				idleAt = r.idleSince
			}
			r.mu.Unlock()
		}
		p.mu.Lock()
		syncing := p.syncing > 0
		p.mu.Unlock()
		now := clk.Now()
		wait := time.Hour
		switch {
		case len(roots) == 0:
		case syncing:
			wait = max(0, last.Add(gap).Sub(now))
		default:
			wait = max(0, last.Add(interval).Sub(now))
		}
		if !idleAt.IsZero() {
			wait = min(wait, max(0, idleAt.Add(p.cfg.IdleTimeout).Sub(now)))
		}
		t.Reset(wait)
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
			continue
		case <-t.C():
		}
		p.closeIdle()
		now = clk.Now()
		if len(roots) > 0 && (syncing || !now.Before(last.Add(interval))) {
			last = now
			progress, failed := p.probe(now.Before(noProgressUntil))
			switch progress {
			case progressAnswered:
				strikes = 0
			case progressUnanswered:
				if strikes++; strikes >= progressStrikes {
					strikes, noProgressUntil = 0, now.Add(progressRetry)
				}
			}
			gap = minProbeGap
			if failed {
				gap = failedProbeGap
			}
		}
	}
}

// closeIdle closes the roots that have had no subscriber for IdleTimeout.
func (p *Plane) closeIdle() {
	now := p.cfg.Clock.Now()
	for _, r := range p.rootList() {
		r.mu.Lock()
		idle := !r.idleSince.IsZero() && now.Sub(r.idleSince) >= p.cfg.IdleTimeout
		r.mu.Unlock()
		if idle && p.forgetRoot(r) {
			r.close() // its loop ends and gives the tenant's watch quota back
		}
	}
}

// What a probe learned of progress requests.
const (
	progressUnused = iota
	progressAnswered
	progressUnanswered
)

// probe confirms the roots current: one O(1) linearizable read gives etcd's
// revision R; a root whose mirror has reached R is confirmed as of the read's
// send time. For the roots behind with a watch open it asks etcd for a progress
// notification on the plane's stream (unless skipProgress) and waits a moment
// for their mirrors to reach R; roots still behind that a subscriber asked to
// confirm are compared by key count and highest mod revision (one read each).
// Last, a root unconfirmed for its ResetAfter is presumed hung: its watch is
// re-opened. It reports what became of the progress request, and whether the
// revision read failed. With no root (the last closed idle since the caller
// looked) it reads nothing.
func (p *Plane) probe(skipProgress bool) (progress int, failed bool) {
	roots := p.rootList()
	if len(roots) == 0 {
		return progressUnused, false
	}
	timeout := p.cfg.RequestTimeout
	for _, r := range roots {
		timeout = min(timeout, r.needs().timeout)
	}
	sent := p.cfg.Clock.Now()
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(p.ctx), stretch(timeout, p.slowProbes))
	defer cancel()
	resp, err := p.cli.Get(ctx, roots[0].prefix, clientv3.WithCountOnly())
	switch {
	case err == nil:
		p.slowProbes = 0
		if err = p.checkCluster(resp.Header); err != nil {
			for _, r := range roots {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
			}
		}
	case p.slowNotGone(ctx):
		p.slowProbes++
	}
	failed = err != nil
	if err == nil {
		rev := resp.Header.Revision
		var behind, watching []*root
		for _, r := range roots {
			if !r.confirmIfReached(rev, sent) {
				behind = append(behind, r)
				if r.watching() {
					watching = append(watching, r)
				}
			}
		}
		if len(watching) > 0 && !skipProgress && p.cli.RequestProgress(p.stream) == nil {
			progress = progressUnanswered
			wctx, wcancel := context.WithTimeout(ctx, progressWait)
			for _, r := range watching {
				if r.waitRev(wctx, rev) && r.confirmIfReached(rev, sent) {
					progress = progressAnswered
				}
			}
			wcancel()
		}
		for _, r := range behind {
			if r.needs().asked && r.confirmedAt().Before(sent) {
				r.compare(ctx, sent)
			}
		}
	}
	now := p.cfg.Clock.Now()
	for _, r := range roots {
		q := r.needs()
		if !q.asked && (skipProgress || progress == progressUnanswered) {
			continue // nothing confirms this root: a silent stream cannot be told from a quiet one
		}
		r.mu.Lock()
		hung := r.listed && !r.opened.IsZero() && now.Sub(r.confirmed) > q.resetAfter && now.Sub(r.opened) > q.resetAfter
		r.mu.Unlock()
		if hung {
			select {
			case r.reopen <- struct{}{}:
			default:
			}
		}
	}
	return progress, failed
}

// confirmIfReached confirms the root as of sent when its mirror has reached rev.
func (r *root) confirmIfReached(rev int64, sent time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.listed || r.rev < rev {
		return false
	}
	r.confirmLocked(sent)
	return true
}

// watching reports whether the root has a watch open.
func (r *root) watching() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.opened.IsZero()
}

// waitRev blocks until the mirror reaches rev (true) or ctx ends (false).
func (r *root) waitRev(ctx context.Context, rev int64) bool {
	for {
		r.mu.Lock()
		reached, moved := r.rev >= rev, r.revCh
		r.mu.Unlock()
		if reached {
			return true
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return false
		}
	}
}

// compare reads the root's key count and highest mod revision (keys only, one
// key returned) and confirms the mirror as of sent when they match its own: for
// one key space at two revisions, equal counts and equal highest mod revisions
// mean equal states (any put raises the highest mod revision, a pure delete
// lowers the count).
func (r *root) compare(ctx context.Context, sent time.Time) {
	resp, err := r.p.cli.Get(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil || r.p.checkCluster(resp.Header) != nil {
		return
	}
	var maxMod int64
	if len(resp.Kvs) > 0 {
		maxMod = resp.Kvs[0].ModRevision
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.listed {
		return
	}
	var mine int64
	for _, kv := range r.kvs {
		mine = max(mine, kv.ModRevision)
	}
	if r.rev >= resp.Header.Revision || (int64(len(r.kvs)) == resp.Count && mine == maxMod) {
		r.confirmLocked(sent)
	}
}

// confirmLocked records that the mirror was current as of sent (r.mu held).
func (r *root) confirmLocked(sent time.Time) {
	if sent.After(r.confirmed) {
		r.confirmed = sent
		r.err = nil
		close(r.confirmedCh)
		r.confirmedCh = make(chan struct{})
	}
}

func (r *root) confirmedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.confirmed
}

// confirmation returns the last confirmation and a channel closed at the next.
func (r *root) confirmation() (time.Time, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.confirmed, r.confirmedCh
}
