package correctnesslease

import (
	"context"
	"errors"
	"time"

	"github.com/coordkit/coordkit/coord"
)

// keyGone says why a key of this session vanished. A key deleted because the
// session's own etcd lease expired is not "deleted by someone else": when the
// session's renewal deadline has passed on the monotonic clock (the process was
// paused, or its keepalives failed, for 2/3 TTL) the reason is
// LossRenewalDeadline; when etcd says the lease is gone it is LossSessionExpired.
// Only otherwise is it LossKeyDeleted. The session itself loses its authority for
// the first two reasons (the renewal loop may not have noticed yet: after a pause,
// the key's delete event and the deadline timer race). It blocks for at most one
// TimeToLive RPC, bounded by KeepaliveTimeout and ctx.
func (s *Session) keyGone(ctx context.Context) coord.LossReason {
	if s.pastDeadline() {
		s.stepDown()
		return coord.LossRenewalDeadline
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.KeepaliveTimeout)
	defer cancel()
	resp, err := s.cli.TimeToLive(ctx, s.id)
	if (err == nil && resp.TTL <= 0) || (err != nil && isLeaseGone(err)) {
		if s.pastDeadline() {
			s.stepDown()
			return coord.LossRenewalDeadline
		}
		s.lose(coord.LossSessionExpired, errors.New("etcd lease of the session is gone"))
		return coord.LossSessionExpired
	}
	return coord.LossKeyDeleted
}

// renewed records the send time of the latest successful keepalive (or grant).
func (s *Session) renewed(sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sent.After(s.lastRenewed) {
		s.lastRenewed = sent
	}
}

// pastDeadline reports whether the renewal deadline (2/3 TTL after the send time
// of the last successful keepalive) has passed on the session clock.
func (s *Session) pastDeadline() bool {
	s.mu.Lock()
	last := s.lastRenewed
	s.mu.Unlock()
	return !s.cfg.Clock.Now().Before(last.Add(s.cfg.stepDownAfter()))
}

// errRenewalDeadline is the cause of a step-down.
var errRenewalDeadline = errors.New("no keepalive succeeded for 2/3 of the TTL")

// stepDown gives up the session's authority because the renewal deadline passed
// (first loss wins) and, if etcd is reachable again, frees the lease now rather
// than after its TTL. Authority is already given up when it returns.
func (s *Session) stepDown() {
	if !s.lose(coord.LossRenewalDeadline, errRenewalDeadline) || s.cli == nil {
		return // renewal-logic tests run without a client
	}
	s.wg.Add(1) // the caller holds a slot, so Close is still waiting
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.TTL)
		defer cancel()
		_, _ = s.cli.Revoke(ctx, s.id)
	}()
}
