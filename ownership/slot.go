package ownership

import (
	"context"
	"errors"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
)

// slot is one partition this member wants or holds, with the goroutine that
// acquires it (queued behind the current holder, so a planned handoff completes
// the moment the old owner releases), holds it and gives it up.
type slot struct {
	p       int
	queued  chan struct{}      // cap 1: this member's key for the partition is in etcd
	since   time.Time          // when the target gave it to this member
	actx    context.Context    // bounds the acquisition and the lease
	acancel context.CancelFunc // called once the slot is done with the lease
	part    *Partition         // while held
	revoked bool               // told to give it up (or to stop waiting)
}

// wantLocked reports whether this member should hold partition p now.
func (m *Member) wantLocked(p int) bool {
	return !m.stopped && !m.leaving && p < len(m.target.Owners) && m.target.Owners[p] == m.id && m.s.Err() == nil
}

// reconcileLocked starts a slot for every partition the target gives this
// member and revokes every slot it no longer should hold.
func (m *Member) reconcileLocked() {
	for p := range m.g.cfg.Partitions {
		want, sl := m.wantLocked(p), m.slots[p]
		switch {
		case want && sl == nil:
			m.startLocked(p)
		case !want && sl != nil && !sl.revoked:
			sl.revoked = true
			if sl.part == nil {
				sl.acancel() // still waiting: stop
				continue
			}
			sl.part.cancel(m.revokeCauseLocked(sl))
		}
	}
}

// revokeCauseLocked is the cause a held partition's context is cancelled with.
// A member resumed from a pause past its renewal deadline can read the target
// that moved its partitions away before its session has noticed the loss: the
// partition is then lost (its key went with the lease, another member may hold
// it already), not handed off. Lease.Valid sees the deadline on the monotonic
// clock and steps the session down; the cause is that loss.
func (m *Member) revokeCauseLocked(sl *slot) error {
	if !sl.part.lease.Valid() {
		if err := sl.part.lease.Err(); err != nil {
			return err
		}
		if err := m.s.Err(); err != nil {
			return err
		}
	}
	select {
	case <-m.hurry:
		return &coord.AuthorityLostError{Lease: sl.part.Token().Lease(), Reason: coord.LossReleased, Err: errors.New("ownership: member closed")}
	default:
	}
	r := &RevokedError{Partition: sl.p, Reason: ReasonRebalance}
	if m.leaving || m.stopped {
		r.Reason = ReasonLeave
	}
	if sl.p < len(m.target.Owners) && m.target.Owners[sl.p] != m.id {
		r.To = m.target.Owners[sl.p]
	}
	return r
}

func (m *Member) startLocked(p int) {
	sl := &slot{p: p, since: time.Now(), queued: make(chan struct{}, 1)}
	// Not derived from m.ctx: stopping revokes held partitions (and cancels
	// waiting ones) through reconcileLocked, and a held one is released
	// before its acquisition context ends.
	sl.actx, sl.acancel = context.WithCancel(context.Background())
	m.slots[p] = sl
	m.slotsWG.Add(1)
	go m.hold(sl)
}

// hold acquires, holds and gives up one partition.
func (m *Member) hold(sl *slot) {
	defer m.slotsWG.Done()
	defer m.ended(sl)
	defer sl.acancel()
	name := LeaseName(m.g.cfg.Group, sl.p)
	l := m.acquire(sl, name)
	if l == nil {
		return
	}
	part := newPartition(sl.p, l)
	m.mu.Lock()
	if sl.revoked {
		m.mu.Unlock()
		m.release(l)
		return
	}
	sl.part = part
	m.mu.Unlock()
	m.in.acquired(time.Since(sl.since))
	m.emit(Acquired, part, ReasonAssigned)
	m.log.Debug("ownership: partition acquired", "partition", sl.p, "token", part.Token().String(), "after", time.Since(sl.since))

	<-part.ctx.Done()
	cause := context.Cause(part.ctx)
	reason := reasonOf(cause)
	m.emit(Revoked, part, reason)
	m.in.moved(reason)
	var rev *RevokedError
	if errors.As(cause, &rev) {
		start := time.Now()
		t := coord.SystemClock().NewTimer(m.g.cfg.DrainTimeout)
		select {
		case <-part.ack:
		case <-t.C():
			m.log.Warn("ownership: drain timeout; releasing the partition anyway", "partition", sl.p, "drain", m.g.cfg.DrainTimeout)
		case <-m.hurry:
		case <-m.s.Done():
		}
		t.Stop()
		m.log.Debug("ownership: partition handed off", "partition", sl.p, "to", rev.To, "drained", time.Since(start))
	} else if reason != ReasonClosed {
		m.log.Warn("ownership: partition lost", "partition", sl.p, "reason", string(reason), "err", cause)
	}
	m.release(l)
}

// acquire takes the partition's lease with correctnesslease.Acquire, which
// queues this member's key behind the current holder's (FIFO) and returns the
// moment that key is deleted: a planned handoff costs no request on the new
// owner's side after the old owner's release. At most Config.MaxAcquiring
// acquisitions per member are queueing at a time (a member given a thousand
// partitions must not flood etcd and starve its own keepalive): the slot is
// given back once the member's key is seen in the queue (the partitions watch,
// in run), when Acquire returns, or after TTL/3 at the latest. It returns nil
// once the partition is no longer wanted or the session is lost.
func (m *Member) acquire(sl *slot, name string) *correctnesslease.Lease {
	type result struct {
		l   *correctnesslease.Lease
		err error
	}
	for attempt := 0; ; attempt++ {
		if !m.acquireSlot(sl.actx) {
			return nil
		}
		if m.paceWrites(sl.actx, 1) != nil { // the queue put
			m.releaseSlot()
			return nil
		}
		ch := make(chan result, 1)
		go func() {
			l, err := correctnesslease.Acquire(sl.actx, m.s, name)
			ch <- result{l, err}
		}()
		t := coord.SystemClock().NewTimer(m.s.TTL() / 3)
		var r result
		select {
		case r = <-ch:
			m.releaseSlot()
		case <-sl.queued:
			m.releaseSlot()
			r = <-ch
		case <-t.C():
			m.releaseSlot()
			r = <-ch
		}
		t.Stop()
		switch {
		case r.err == nil:
			return r.l
		case sl.actx.Err() != nil || m.s.Err() != nil:
			return nil
		}
		// A fence still landing (ErrAlreadyQueued), the key deleted while
		// waiting, etcd unreachable: try again while wanted.
		m.log.Warn("ownership: acquire failed; retrying", "partition", sl.p, "err", r.err)
		if (coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second, Rand: m.g.cfg.backoffRand}).Wait(sl.actx, coord.SystemClock(), attempt) != nil {
			return nil
		}
	}
}

// paceWrites waits until the tenant's write quota allows n more writes
// (Config.Quotas), counting the writes it delayed. It returns ctx's cause when
// ctx ends first.
func (m *Member) paceWrites(ctx context.Context, n int) error {
	waited, err := m.g.cfg.Quotas.WaitWrite(ctx, m.g.keys.target, n)
	if waited > 0 {
		m.in.quotaDelayed(n)
	}
	return err
}

// maxConcurrentReleases bounds the releases (single guarded deletes) a member
// has in flight at once; Config.MaxAcquiring its acquisitions queueing.
const maxConcurrentReleases = 64

func (m *Member) acquireSlot(ctx context.Context) bool {
	select {
	case m.rpcs <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (m *Member) releaseSlot() { <-m.rpcs }

// queuedKey tells the slot of partition p (if any) that its key is in etcd.
func (m *Member) queuedKey(p int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sl := m.slots[p]; sl != nil {
		select {
		case sl.queued <- struct{}{}:
		default:
		}
	}
}

// release deletes the partition's key (guarded by its create revision): the
// next owner, waiting for that delete, acquires at once. It retries with
// backoff for as long as the session lives (a key left behind would keep the
// partition from its next owner until the session ends). After Close every
// release shares Close's deadline of one TTL; past it, or once the session is
// lost, the keys are left to the session's lease (revoked at its Close or
// step-down, else expiring within the TTL).
func (m *Member) release(l *correctnesslease.Lease) {
	for attempt := 0; m.s.Err() == nil; attempt++ {
		deadline := time.Now().Add(m.s.TTL() / 3)
		select {
		case <-m.hurry:
			if m.closeBy.Before(deadline) {
				deadline = m.closeBy
			}
		default:
		}
		if !time.Now().Before(deadline) {
			m.log.Warn("ownership: partition not released by Close's deadline; it is freed with the session's lease", "lease", l.Name())
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		var err error
		select {
		case m.releases <- struct{}{}:
			if err = m.paceWrites(ctx, 1); err == nil { // the delete
				err = l.Release(ctx)
			}
			<-m.releases
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		cancel()
		if err == nil {
			return
		}
		m.log.Warn("ownership: release failed; retrying", "lease", l.Name(), "err", err)
		t := coord.SystemClock().NewTimer((coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second, Rand: m.g.cfg.backoffRand}).Delay(attempt))
		select {
		case <-m.s.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// ended removes a finished slot and starts it again if the target still gives
// the partition to this member (it moved back, or its key was deleted).
func (m *Member) ended(sl *slot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slots[sl.p] == sl {
		delete(m.slots, sl.p)
	}
	if m.wantLocked(sl.p) && m.slots[sl.p] == nil {
		m.startLocked(sl.p)
	}
	m.checkIdleLocked()
}

// checkIdleLocked closes idle when a leaving member holds nothing more.
func (m *Member) checkIdleLocked() {
	if m.leaving && len(m.slots) == 0 && m.idle != nil {
		select {
		case <-m.idle:
		default:
			close(m.idle)
		}
	}
}

// reasonOf maps a partition context's cause to an event reason.
func reasonOf(cause error) Reason {
	var rev *RevokedError
	if errors.As(cause, &rev) {
		return rev.Reason
	}
	var lost *coord.AuthorityLostError
	if errors.As(cause, &lost) {
		switch lost.Reason {
		case coord.LossKeyDeleted:
			return ReasonKeyLost
		case coord.LossReleased:
			return ReasonClosed
		}
	}
	return ReasonSessionLost
}
