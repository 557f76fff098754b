package correctnesslease

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// Acquire takes the lease name for session s, waiting in FIFO order (by create
// revision) behind earlier requests. It puts the session's key
// /tenants/{tenant}/elections/{name}/<lease id> and blocks until every earlier key
// is gone, watching only its predecessor (no thundering herd) and its own key.
//
// ctx bounds the wait AND the lease: when ctx ends, the returned Lease loses its
// authority (LossCancelled). It returns early with an error wrapping a
// *coord.AuthorityLostError when, while waiting, ctx ends (LossCancelled, which
// also matches ctx's error), the session loses authority, or the key is deleted
// or overwritten (LossKeyDeleted, etcd issue 19597: never a lease without a key);
// its key is then removed. That holds even when ctx ends while the queuing
// transaction is in flight and its outcome is unknown: Acquire then fences that
// transaction off (one more RPC, bounded by TTL/3; retried in the background
// while the session lives), so it can never create the key after Acquire
// returned, and until the fence has landed another Acquire of the name on this
// session returns ErrAlreadyQueued. Invalid names return *coord.NameError; a
// second Acquire of a name this session already holds or waits for returns
// ErrAlreadyQueued.
func Acquire(ctx context.Context, s *Session, name string) (*Lease, error) {
	return acquire(ctx, s, name, true, true)
}

// TryAcquire is Acquire without waiting: when any earlier key exists (someone
// holds the lease or waits for it) it removes its own key and returns an error
// matching ErrHeld. It blocks for one or two RPCs, bounded by ctx; when the etcd
// member it reaches has no leader, it fails when ctx ends with an error that also
// matches coord.ErrNoLeader.
func TryAcquire(ctx context.Context, s *Session, name string) (*Lease, error) {
	return acquire(ctx, s, name, false, true)
}

func acquire(ctx context.Context, s *Session, name string, wait, retryStale bool) (_ *Lease, err error) {
	if s == nil {
		return nil, &ConfigError{Field: "session", Reason: "nil *Session"}
	}
	prefix, err := coord.Key(s.cfg.Tenant, coord.KindElections, name)
	if err != nil {
		return nil, err
	}
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("correctnesslease: acquire %s: %w", prefix,
			&coord.AuthorityLostError{Lease: prefix, Reason: coord.LossCancelled, Err: err})
	}
	spanName := "correctnesslease.Acquire"
	if !wait {
		spanName = "correctnesslease.TryAcquire"
	}
	ctx, span := s.in.tracer.Start(ctx, spanName, trace.WithAttributes(
		attribute.String(coord.AttrTenant, s.cfg.Tenant), attribute.String(coord.AttrLease, prefix)))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()

	l := &Lease{s: s, name: name, prefix: prefix, key: s.keyFor(prefix)}
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if err := s.register(l); err != nil {
		l.cancel(err)
		return nil, fmt.Errorf("correctnesslease: acquire %s: %w", prefix, err)
	}
	watching := false
	defer func() {
		if !watching {
			s.wg.Done()
		}
	}()

	// The queuing RPCs end when the lease loses its authority (Close, step-down)
	// as well as with ctx: Close waits for this goroutine.
	qctx, qcancel := context.WithCancel(ctx)
	defer qcancel()
	if !wait {
		// A member cut off from its quorum refuses the write (etcd's client retries
		// it until ctx ends), so TryAcquire's error names the cause: coord.ErrNoLeader.
		qctx = clientv3.WithRequireLeader(qctx)
	}
	defer context.AfterFunc(l.ctx, qcancel)()

	var q queued
	if wait {
		q = l.queueBatched(qctx)
	} else {
		q = s.queue(qctx, []*Lease{l})[0]
	}
	if err := q.err; err != nil {
		var stale *staleKeyError
		if errors.As(err, &stale) {
			// A key of this session that no live Lease owns (someone wrote
			// it): remove that version only, and queue once more.
			l.lose(coord.LossReleased, nil)
			if !retryStale {
				return nil, fmt.Errorf("%w: acquire %s (stale key %s)", ErrAlreadyQueued, prefix, l.key)
			}
			_, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", stale.rev)).
				Then(clientv3.OpDelete(l.key)).Commit()
			if err != nil {
				return nil, fmt.Errorf("correctnesslease: acquire %s: remove stale key: %w", prefix, err)
			}
			return acquire(ctx, s, name, wait, false)
		}
		var lost *coord.AuthorityLostError
		if errors.As(err, &lost) {
			l.lose(lost.Reason, lost.Err)
			return nil, fmt.Errorf("correctnesslease: acquire %s: queue: %w", prefix, err)
		}
		// No answer: the put may apply now or later. Fence it off while l is
		// still registered, so that no other Acquire of this name on this
		// session queues the same key meanwhile; l unregisters once settled.
		s.unknownQueues.Add(1)
		l.fenceUnknown(err)
		err = etcderr.Classify(err)
		if cause := ended(ctx); cause != nil {
			err = fmt.Errorf("%w: %w", err, &coord.AuthorityLostError{Lease: prefix, Reason: coord.LossCancelled, Err: cause})
		}
		return nil, fmt.Errorf("correctnesslease: acquire %s: queue: %w", prefix, err)
	}
	l.rev = q.rev
	kvs := q.kvs
	var pred string
	if len(kvs) == 2 {
		pred = string(kvs[1].Key)
	}
	// Watch our own key from the revision after its creation, waiting and held.
	watching = true
	go l.watchKey()

	// The caller's context ending is loss of authority.
	l.bindCaller(ctx)

	if pred != "" && !wait {
		l.lose(coord.LossReleased, nil)
		l.cleanup()
		return nil, fmt.Errorf("%w: %s (%s is ahead)", ErrHeld, prefix, pred)
	}
	rev := q.rev
	for pred != "" {
		pred, rev, err = l.waitFor(pred, rev)
		if err != nil {
			l.cleanup()
			return nil, fmt.Errorf("correctnesslease: acquire %s: %w", prefix, err)
		}
	}

	l.mu.Lock()
	lost := l.lost
	if lost == nil {
		l.heldAt = s.cfg.Clock.Now()
	}
	l.mu.Unlock()
	if lost != nil {
		l.cleanup()
		return nil, fmt.Errorf("correctnesslease: acquire %s: %w", prefix, lost)
	}
	s.in.acquired(prefix)
	span.SetAttributes(attribute.Int64(attrTokenRevision, l.rev))
	return l, nil
}

// waitFor blocks until the predecessor key (seen at revision rev) is deleted,
// then reads, in one transaction that also checks that our key still exists, the
// next predecessor. It returns pred == "" when we are first. Any loss of the
// lease (session, own key, caller) ends the wait with the loss as error.
func (l *Lease) waitFor(pred string, rev int64) (string, int64, error) {
	ctx := l.ctx
	if err := l.waitGone(pred, rev); err != nil {
		return "", 0, err
	}
	for attempt := 0; ; attempt++ {
		resp, err := l.s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
			Then(clientv3.OpGet(l.prefix+"/", clientv3.WithPrefix(),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
				clientv3.WithMaxCreateRev(l.rev-1), clientv3.WithLimit(1))).
			Commit()
		if err != nil {
			if lost := l.lossErr(); lost != nil {
				return "", 0, lost
			}
			if werr := (coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second, Rand: l.s.cfg.backoffRand}).Wait(ctx, l.s.cfg.Clock, attempt); werr != nil {
				if lost := l.lossErr(); lost != nil {
					return "", 0, lost
				}
				return "", 0, werr
			}
			continue
		}
		if !resp.Succeeded {
			l.keyVanished(errors.New("key " + l.key + " deleted or changed while waiting"))
			return "", 0, l.lossErr()
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return "", resp.Header.Revision, nil
		}
		return string(kvs[0].Key), resp.Header.Revision, nil
	}
}

// waitGone blocks until the predecessor key (seen at revision rev) is gone,
// following it through the session's watch plane from rev+1: its deletion, or a
// resync (after a compaction) that no longer shows it as it was. Any loss of
// the lease (session, own key, caller) ends the wait with the loss as error.
func (l *Lease) waitGone(pred string, rev int64) error {
	sub, err := l.s.plane.Subscribe(watchplane.Spec{Key: pred, From: rev + 1,
		RequestTimeout: l.s.cfg.KeepaliveTimeout, Backoff: coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second}})
	if err != nil {
		l.lose(coord.LossCancelled, fmt.Errorf("cannot follow predecessor %s: %w", pred, err))
		return l.lossErr()
	}
	defer sub.Close()
	for {
		select {
		case <-l.ctx.Done():
			return l.lossErr()
		case <-sub.Done():
			l.lose(coord.LossCancelled, fmt.Errorf("cannot follow predecessor %s: %w", pred, sub.Err()))
			return l.lossErr()
		case <-sub.Ready():
		}
		for {
			u, ok := sub.Take()
			if !ok {
				break
			}
			if u.Resync && (len(u.KVs) == 0 || u.KVs[0].ModRevision > rev) {
				return nil // gone (or replaced) while we were not looking: read the queue again
			}
			for _, ev := range u.Events {
				if ev.Type == clientv3.EventTypeDelete {
					l.s.wakeups.Add(1)
					return nil
				}
			}
		}
	}
}

// cleanup removes our key (if it is still ours: guarded by its create revision)
// after a failed acquisition. The lease has lost its authority already. See
// Session.settle for how long it tries.
func (l *Lease) cleanup() {
	l.lose(coord.LossReleased, nil)
	l.s.settle(func() bool {
		select {
		case <-l.s.done:
			return true // the session's etcd lease takes the key with it
		default:
		}
		ctx, cancel := context.WithTimeout(l.s.stopCtx, l.s.cfg.TTL/3)
		defer cancel()
		if err := l.deleteKey(ctx); err != nil {
			l.s.cfg.Logger.Warn("correctnesslease: could not remove a queued key; retrying", "key", l.key, "err", err)
			return false
		}
		return true
	}, nil)
}
