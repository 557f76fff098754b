package correctnesslease

import (
	"context"
	"errors"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
)

// ended returns ctx's cause once it is done or its deadline has passed: etcd
// learns the deadline too and may answer "request timed out" an instant before
// the client's own timer has cancelled ctx.
func ended(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// staleKeyError is queue's report of our key existing already, at rev.
type staleKeyError struct{ rev int64 }

func (e *staleKeyError) Error() string {
	return "stale key at revision " + strconv.FormatInt(e.rev, 10)
}

// queue puts the lease's key, in one transaction that also reads the newest two
// keys under the prefix: ours (just created, so the newest) and our predecessor,
// if any. The transaction applies only if the key does not exist and the
// session's guard (the mod revision of its member key) is unchanged: a fence
// (fenceUnknown) moves the guard, so a queue transaction still in flight when it
// lands can never apply after it. It returns a *staleKeyError when the key
// exists, a *coord.AuthorityLostError when the session's member key is gone, and
// the RPC's error when there was no answer (the outcome is then unknown).
func (l *Lease) queue(ctx context.Context) (*clientv3.TxnResponse, error) {
	s := l.s
	for {
		guard := s.guard.Load()
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0),
				clientv3.Compare(clientv3.ModRevision(s.member), "=", guard)).
			Then(
				clientv3.OpPut(l.key, "", clientv3.WithLease(s.id)),
				clientv3.OpGet(l.prefix+"/", clientv3.WithPrefix(),
					clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2)),
			).
			Else(clientv3.OpGet(l.key), clientv3.OpGet(s.member)).
			Commit()
		if err != nil {
			if isLeaseGone(err) { // a definite answer: nothing was written
				s.lose(coord.LossSessionExpired, err)
				return nil, &coord.AuthorityLostError{Lease: l.prefix, Reason: coord.LossSessionExpired, Err: err}
			}
			return nil, err
		}
		if resp.Succeeded {
			return resp, nil
		}
		key, member := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
		if len(member) == 0 {
			reason := s.keyGone(ctx)
			cause := errors.New("session key " + s.member + " is gone")
			s.lose(reason, cause)
			return nil, &coord.AuthorityLostError{Lease: l.prefix, Reason: reason, Err: cause}
		}
		s.raiseGuard(member[0].ModRevision)
		if len(key) > 0 {
			return nil, &staleKeyError{rev: key[0].CreateRevision}
		}
		// Only the guard moved (another Acquire's fence): queue again.
	}
}

// fenceUnknown settles a queue transaction that got no answer (cause): one
// transaction rewrites the session's member key, which moves the guard every
// queue transaction compares, and deletes our key. Once it lands, the transaction
// in doubt has either applied before it (and its key is deleted) or can never
// apply. l stays registered until then, so another Acquire of this name on this
// session is refused (ErrAlreadyQueued) rather than queued under a key about to
// be deleted. See Session.settle for how long it tries.
func (l *Lease) fenceUnknown(cause error) {
	l.s.settle(l.fence, func() { l.lose(coord.LossCancelled, cause) })
}

// fence makes one attempt at fenceUnknown's transaction. It reports whether the
// outcome is settled: the fence landed, or the session (with its keys) is gone.
func (l *Lease) fence() bool {
	s := l.s
	select {
	case <-s.done:
		return true
	default:
	}
	ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.TTL/3)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpPut(s.member, s.memberValue, clientv3.WithLease(s.id)),
		clientv3.OpDelete(l.key),
	).Commit()
	switch {
	case err == nil:
		s.raiseGuard(resp.Header.Revision)
		s.fencedKeys.Add(resp.Responses[1].GetResponseDeleteRange().Deleted)
		return true
	case isLeaseGone(err):
		s.lose(coord.LossSessionExpired, err)
		return true
	}
	s.cfg.Logger.Warn("correctnesslease: could not settle a queue transaction of unknown outcome; retrying",
		"key", l.key, "err", err)
	return false
}
