package correctnesslease

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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

// queued is the outcome of one queue transaction for one lease: the
// transaction's revision (the key's create revision: the token) and the newest
// two keys under the prefix, ours first.
type queued struct {
	rev int64
	kvs []*mvccpb.KeyValue
	err error
}

// queue puts the leases' keys in one transaction that also reads, for each, the
// newest two keys under its prefix: its own (just created, so the newest) and
// its predecessor, if any. The transaction applies only if no key exists and
// the session's guard (the mod revision of its member key) is unchanged: a fence
// (fenceUnknown) moves the guard, so a queue transaction still in flight when it
// lands can never apply after it. When it does not apply, leases whose key
// exists get a *staleKeyError, and the others are queued again at once (only
// the guard moved, or a stale key held them back) — but for a lease whose fence
// has begun (its caller gave up while the batch was in flight), whose key must
// never be created after the fence. A lease gets a
// *coord.AuthorityLostError when the session's member key or lease is gone,
// and the RPC's error when there was no answer (the outcome is then unknown).
// The results come in the order of ls; ctx bounds every attempt.
func (s *Session) queue(ctx context.Context, ls []*Lease) []queued {
	out := make([]queued, len(ls))
	left := make([]int, len(ls))
	for i := range ls {
		left[i] = i
	}
	lost := func(i int, reason coord.LossReason, cause error) {
		out[i].err = &coord.AuthorityLostError{Lease: ls[i].prefix, Reason: reason, Err: cause}
	}
	for len(left) > 0 {
		guard := s.guard.Load()
		// After the guard is read: a lease whose fence has begun is not
		// queued again (a batch meets the guard its fence moved, below). A
		// fence that begins after this check lands above guard, so this
		// transaction can no longer apply after it.
		left = slices.DeleteFunc(left, func(i int) bool {
			if ls[i].fencing.Load() {
				out[i].err = errFencedInQueue
				return true
			}
			return false
		})
		if len(left) == 0 {
			break
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.member), "=", guard)}
		var thens, elses []clientv3.Op
		for _, i := range left {
			l := ls[i]
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0))
			thens = append(thens, clientv3.OpPut(l.key, "", clientv3.WithLease(s.id)),
				clientv3.OpGet(l.prefix+"/", clientv3.WithPrefix(),
					clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2)))
			elses = append(elses, clientv3.OpGet(l.key))
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(thens...).Else(append(elses, clientv3.OpGet(s.member))...).Commit()
		if err != nil {
			for _, i := range left {
				if isLeaseGone(err) { // a definite answer: nothing was written
					lost(i, coord.LossSessionExpired, err)
				} else {
					out[i].err = err
				}
			}
			if isLeaseGone(err) {
				s.lose(coord.LossSessionExpired, err)
			}
			return out
		}
		if resp.Succeeded {
			for j, i := range left {
				out[i] = queued{rev: resp.Header.Revision, kvs: resp.Responses[2*j+1].GetResponseRange().Kvs}
			}
			return out
		}
		member := resp.Responses[len(left)].GetResponseRange().Kvs
		if len(member) == 0 {
			reason := s.keyGone(ctx)
			cause := errors.New("session key " + s.member + " is gone")
			s.lose(reason, cause)
			for _, i := range left {
				lost(i, reason, cause)
			}
			return out
		}
		s.raiseGuard(member[0].ModRevision)
		var again []int
		for j, i := range left {
			if key := resp.Responses[j].GetResponseRange().Kvs; len(key) > 0 {
				out[i].err = &staleKeyError{rev: key[0].CreateRevision}
			} else {
				again = append(again, i)
			}
		}
		left = again
	}
	return out
}

// errFencedInQueue is the result of a lease taken out of its batch because
// its fence has begun; its caller has returned already.
var errFencedInQueue = errors.New("correctnesslease: fenced while its batch was queued")

// fenceUnknown settles a queue transaction that got no answer (cause): one
// transaction rewrites the session's member key, which moves the guard every
// queue transaction compares, and deletes our key. Once it lands, the transaction
// in doubt has either applied before it (and its key is deleted) or can never
// apply. l stays registered until then, so another Acquire of this name on this
// session is refused (ErrAlreadyQueued) rather than queued under a key about to
// be deleted. See Session.settle for how long it tries.
func (l *Lease) fenceUnknown(cause error) {
	l.fencing.Store(true)
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
