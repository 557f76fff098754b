package correctnesslease

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/codes"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// Lease is one held correctness lease: a key under the election prefix, owned by a
// Session, first in FIFO order. Its authority ends at the first of: Release,
// session step-down or expiry, its key deleted or overwritten by someone else, or
// the context given to Acquire ending. Safe for concurrent use.
type Lease struct {
	s      *Session
	name   string // the caller's name
	prefix string // /tenants/{t}/elections/{name}
	key    string // prefix/<session lease id hex>
	rev    int64  // create revision of key: the token

	ctx    context.Context
	cancel context.CancelCauseFunc
	stopAF func() bool // stops the AfterFunc on the caller's context

	// fencing is set before the fence of a queue transaction of unknown
	// outcome is sent (fenceUnknown): a batch that meets the guard the fence
	// moved is queued again without this key (Session.queue).
	fencing atomic.Bool

	mu        sync.Mutex
	lost      *coord.AuthorityLostError
	heldAt    time.Time    // zero while waiting
	releasing *releaseCall // the Release in flight, if any
	released  bool         // a Release succeeded: the key is gone
}

// Token returns the fencing token of the lease: its election prefix
// (/tenants/{t}/elections/{name}) and the create revision of the holder's key.
// Send it with every write; the resource rejects it once a newer holder has
// written. It stays the same after authority is lost (so that a late write is
// rejected as stale, not accepted unfenced).
func (l *Lease) Token() coord.Token { return newToken(l.prefix, l.rev) }

// Name returns the name passed to Acquire. It does not block.
func (l *Lease) Name() string { return l.name }

// Key returns the etcd key of the holder (prefix/<session lease id hex>). It
// does not block.
func (l *Lease) Key() string { return l.key }

// Context returns a context that is cancelled the moment the lease's authority is
// in doubt. context.Cause returns a *coord.AuthorityLostError whose Reason says
// why: LossRenewalDeadline (step-down), LossSessionExpired, LossKeyDeleted,
// LossCancelled (the context given to Acquire ended; it wraps that context's
// cause) or LossReleased. It carries the values of Acquire's context.
func (l *Lease) Context() context.Context { return l.ctx }

// Err returns nil while the lease has authority, and the *coord.AuthorityLostError
// afterwards.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		return nil
	}
	return l.lost
}

// Valid reports whether the holder may still act as the holder right now, for
// lease-gated reads: the lease has not lost its authority AND, on the session's
// monotonic clock, less than 2/3 TTL has passed since the send time of the last
// confirmed renewal. The second check catches a process that was paused past its
// step-down deadline before the renewal loop has run again to notice. It does not
// block (no RPC). Once false it stays false.
func (l *Lease) Valid() bool {
	if l.Err() != nil {
		return false
	}
	if l.s.pastDeadline() {
		// Step down here rather than wait for the renewal loop's timer
		// (which frees the etcd lease early as well): no goroutine is
		// started from a caller's read.
		l.s.lose(coord.LossRenewalDeadline, errRenewalDeadline)
		return false
	}
	return true
}

// Release gives up the lease: the Context is cancelled (LossReleased) first, then
// the key is deleted if and only if its create revision is still this lease's
// token, so a retried or late Release never deletes a newer holder's key (etcd
// issue 22082). It blocks for one RPC, bounded by ctx. Calls made while another
// Release is in flight wait for it (bounded by their own ctx) and return its
// result. Once a Release has succeeded, later calls return nil without an RPC.
// When the delete fails (ctx ended, etcd unreachable) Release returns the error
// and the key stays, so rivals are refused, until Release is called again (it
// retries the guarded delete), the session is closed, or its lease expires.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	if r := l.releasing; r != nil {
		l.mu.Unlock()
		select {
		case <-r.done:
			return r.err
		case <-ctx.Done():
			return fmt.Errorf("correctnesslease: release %s: waiting for an earlier Release: %w", l.prefix, context.Cause(ctx))
		}
	}
	r := &releaseCall{done: make(chan struct{})}
	l.releasing = r
	l.mu.Unlock()

	l.lose(coord.LossReleased, nil)
	ctx, span := l.s.in.tracer.Start(ctx, "correctnesslease.Release")
	defer span.End()
	if err := l.deleteBatched(ctx); err != nil {
		span.SetStatus(codes.Error, err.Error())
		r.err = fmt.Errorf("correctnesslease: release %s: %w", l.prefix, err)
	}
	l.mu.Lock()
	l.releasing, l.released = nil, r.err == nil
	l.mu.Unlock()
	close(r.done)
	return r.err
}

// releaseCall is one Release in flight; err is set before done is closed.
type releaseCall struct {
	done chan struct{}
	err  error
}

// deleteKey deletes the key only if it is still ours.
func (l *Lease) deleteKey(ctx context.Context) error {
	_, err := l.s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
		Then(clientv3.OpDelete(l.key)).
		Commit()
	return err
}

// lose ends the lease's authority (first call wins): it cancels the context with
// the cause, unregisters from the session and records metrics.
func (l *Lease) lose(reason coord.LossReason, cause error) {
	l.mu.Lock()
	if l.lost != nil {
		l.mu.Unlock()
		return
	}
	l.lost = &coord.AuthorityLostError{Lease: l.prefix, Reason: reason, Err: cause}
	lost, heldAt := l.lost, l.heldAt
	l.mu.Unlock()

	// Unregister first: whoever sees the context end may acquire the name again
	// on this session at once.
	l.s.unregister(l)
	l.cancel(lost)
	l.mu.Lock()
	stop := l.stopAF
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
	if !heldAt.IsZero() {
		l.s.in.lost(l.prefix, reason, l.s.cfg.Clock.Now().Sub(heldAt))
		if reason != coord.LossReleased {
			l.s.cfg.Logger.Warn("correctnesslease: lease lost authority", "lease", l.prefix,
				"token", l.Token().String(), "reason", string(reason), "err", cause)
		}
	}
}

// bindCaller makes the end of the caller's context a loss of authority.
func (l *Lease) bindCaller(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		l.lose(coord.LossCancelled, context.Cause(ctx))
	})
	l.mu.Lock()
	l.stopAF = stop
	lost := l.lost != nil
	l.mu.Unlock()
	if lost {
		stop()
	}
}

// lossErr returns the loss (a *coord.AuthorityLostError) or nil.
func (l *Lease) lossErr() *coord.AuthorityLostError {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// watchKey follows the lease's own key from the revision after its creation,
// for the whole life of the lease, waiting and held, through the session's
// watch plane (one upstream etcd watch for every key of the tenant's elections
// in the process): a delete, or a put by anyone (this package never writes the
// key twice), is loss of authority. Following from a revision leaves no gap
// between the creation and the watch; a resync (the plane re-listed after a
// compaction, or this subscriber fell behind) checks the key as it is.
func (l *Lease) watchKey() {
	defer l.s.wg.Done()
	sub, err := l.s.plane.Subscribe(watchplane.Spec{Key: l.key, From: l.rev + 1,
		RequestTimeout: l.s.cfg.KeepaliveTimeout, Backoff: coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second}})
	if err != nil {
		// The client was closed: nothing can tell this lease its key is gone.
		l.lose(coord.LossCancelled, fmt.Errorf("cannot follow key %s: %w", l.key, err))
		return
	}
	defer sub.Close()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-sub.Done():
			l.lose(coord.LossCancelled, fmt.Errorf("cannot follow key %s: %w", l.key, sub.Err()))
			return
		case <-sub.Ready():
		}
		for {
			u, ok := sub.Take()
			if !ok {
				break
			}
			if l.follow(u) {
				return
			}
		}
	}
}

// follow reads one update of the lease's key and reports whether it ended the
// lease's authority.
func (l *Lease) follow(u watchplane.Update) bool {
	if u.Resync {
		switch {
		case len(u.KVs) == 0:
			l.keyVanished(fmt.Errorf("key %s gone at revision %d (found by a resync)", l.key, u.Revision))
			return true
		case u.KVs[0].CreateRevision != l.rev || u.KVs[0].ModRevision != l.rev:
			l.lose(coord.LossKeyDeleted, fmt.Errorf("key %s changed at revision %d (found by a resync)", l.key, u.KVs[0].ModRevision))
			return true
		}
		return false
	}
	if len(u.Events) == 0 {
		return false
	}
	// Any event of the key after its creation ends the lease: the first says how.
	if ev := u.Events[0]; ev.Type == clientv3.EventTypePut {
		l.lose(coord.LossKeyDeleted, fmt.Errorf("key %s overwritten at revision %d", l.key, ev.Kv.ModRevision))
	} else {
		l.keyVanished(fmt.Errorf("key %s deleted at revision %d", l.key, ev.Kv.ModRevision))
	}
	return true
}

// keyVanished ends the lease's authority because its key is gone (detail says
// how it was seen), with the reason Session.keyGone finds: the session's renewal
// deadline or expiry when the key went with the session's etcd lease,
// LossKeyDeleted only when someone else deleted it.
func (l *Lease) keyVanished(detail error) {
	if l.ctx.Err() != nil {
		return // lost already (a Release deletes the key after cancelling)
	}
	l.lose(l.s.keyGone(l.s.stopCtx), detail)
}
