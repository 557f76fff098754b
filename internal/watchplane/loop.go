package watchplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
)

// run is the root's list/watch loop: list when there is no mirror (or after a
// compaction), watch from the mirror's revision, and after the watch ends for
// any reason wait a full-jitter backoff and resume. It returns when the root
// closes.
func (r *root) run() {
	defer r.p.wg.Done()
	defer r.release()
	attempt, needList, reason := 0, true, "first"
	for r.ctx.Err() == nil {
		if needList {
			if err := r.list(); err != nil {
				if r.ctx.Err() != nil {
					return
				}
				r.fail("list failed; keeping the mirror", err, attempt)
				if !r.pause(attempt) {
					return
				}
				attempt++
				continue
			}
			needList = false
		}
		wch, cancel, err := r.open(reason)
		if err == nil {
			var delivered, compacted bool
			delivered, compacted, err = r.consume(wch)
			cancel()
			if delivered {
				attempt, r.slow = 0, 0
			}
			reason = "resume"
			switch {
			case compacted:
				needList, reason = true, "compacted"
			case errors.Is(err, errHung):
				reason = "hung"
			}
		}
		if r.ctx.Err() != nil || r.p.cli.Ctx().Err() != nil {
			return // closing (a closed client closes the plane)
		}
		r.fail("watch ended; resuming", err, attempt)
		if !r.pause(attempt) {
			return
		}
		attempt++
	}
}

// fail records err as the root's error and logs it.
func (r *root) fail(msg string, err error, attempt int) {
	r.mu.Lock()
	r.err, r.opened = err, time.Time{}
	r.restarts++
	rev := r.rev
	r.mu.Unlock()
	r.p.cfg.Logger.Info("watchplane: "+msg, "root", r.prefix, "revision", rev, "attempt", attempt, "err", err)
}

// pause waits the backoff before attempt (the most demanding subscriber's
// schedule) after asking the client to reconnect now, so that the jittered
// schedule, not gRPC's own, decides when a fleet comes back. It returns false
// when the root closes.
func (r *root) pause(attempt int) bool {
	if cc := r.p.cli.ActiveConnection(); cc != nil {
		cc.ResetConnectBackoff()
	}
	t := r.p.cfg.Clock.NewTimer(r.needs().backoff.Delay(attempt))
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// admit waits for a token of the tenant's reconnect budget. It returns false
// when the root closes.
func (r *root) admit() bool {
	for {
		wait, err := r.p.cfg.Quotas.AllowReconnect(r.prefix)
		if err == nil {
			return true
		}
		r.p.in.throttled.Add(r.ctx, 1, metric.WithAttributeSet(r.attrs))
		t := r.p.cfg.Clock.NewTimer(wait)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}

// list reads the whole root at one revision and replaces the mirror; every
// subscriber whose revision it passed resyncs from it. The first list of a root
// is read at the revision before the earliest subscriber's From, when that is
// still in etcd's history: the subscribers that started from a revision of their
// own (a lease's key, a waiter's predecessor, Observe's first read) get every
// event after it, not a resync that would skip the changes in between. Any
// other list reads the current, linearizable state and confirms the mirror.
func (r *root) list() error {
	if !r.admit() {
		return context.Cause(r.ctx)
	}
	r.mu.Lock()
	at := int64(0)
	if !r.listed {
		for s := range r.subs {
			if s.from > 0 && (at == 0 || s.from-1 < at) {
				at = s.from - 1
			}
		}
	}
	r.mu.Unlock()
	sent := r.p.cfg.Clock.Now()
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(r.ctx), stretch(r.needs().timeout, r.slow))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if at > 0 {
		opts = append(opts, clientv3.WithRev(at))
	}
	resp, err := r.p.cli.Get(ctx, r.prefix, opts...)
	if at > 0 && errors.Is(err, rpctypes.ErrCompacted) {
		at = 0 // compacted away: the current state, and the early subscribers resync
		resp, err = r.p.cli.Get(ctx, r.prefix, clientv3.WithPrefix())
	}
	if err != nil {
		if r.p.slowNotGone(ctx) {
			r.slow++
		}
		return fmt.Errorf("watchplane: list %s: %w", r.prefix, etcderr.Classify(err))
	}
	if err := r.p.checkCluster(resp.Header); err != nil {
		return fmt.Errorf("watchplane: list %s: %w", r.prefix, err)
	}
	kvs := make(map[string]*mvccpb.KeyValue, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		kvs[string(kv.Key)] = kv
	}
	rev := resp.Header.Revision
	if at > 0 {
		rev = at
	}
	r.mu.Lock()
	relist := r.listed
	reason := resyncInitial
	if relist {
		reason = resyncRelist
		r.relists++
		r.p.relists.Add(1) // counted before any subscriber can take the resync
		r.p.in.relists.Add(r.ctx, 1, metric.WithAttributeSet(r.attrs))
	}
	r.kvs, r.listed, r.err = kvs, true, nil
	r.setRev(max(r.rev, rev))
	r.hist.reset(rev + 1)
	for s := range r.subs {
		if s.from <= rev {
			s.needResync(reason)
		}
	}
	if at == 0 {
		r.confirmLocked(sent)
	}
	r.mu.Unlock()
	if relist {
		r.p.cfg.Logger.Info("watchplane: re-listed", "root", r.prefix, "revision", rev, "keys", len(kvs))
	}
	return nil
}

// open starts the watch from the mirror's revision, on the plane's stream, with
// progress notifications. clientv3's Watch blocks until etcd confirms the watch
// — forever while etcd is unreachable — so the wait is bounded by
// RequestTimeout; on timeout the watch is cancelled.
func (r *root) open(reason string) (clientv3.WatchChan, context.CancelFunc, error) {
	if !r.admit() {
		return nil, nil, context.Cause(r.ctx)
	}
	r.mu.Lock()
	from := r.rev + 1
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(r.p.stream)
	stop := context.AfterFunc(r.ctx, cancel) // the root's end ends the watch
	deadline, dcancel := context.WithTimeout(r.ctx, stretch(r.needs().timeout, r.slow))
	defer dcancel()
	watchdog := context.AfterFunc(deadline, cancel)
	wch := r.p.cli.Watch(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
	if !watchdog() {
		stop()
		cancel()
		if r.ctx.Err() != nil {
			return nil, nil, context.Cause(r.ctx)
		}
		if r.p.slowNotGone(deadline) {
			r.slow++
		}
		return nil, nil, fmt.Errorf("watchplane: watch %s from revision %d: %w", r.prefix, from, errOpenTimeout)
	}
	r.p.opens.Add(1)
	r.p.in.opens.Add(r.ctx, 1, withReason(r.attrs, reason))
	r.mu.Lock()
	r.opened = r.p.cfg.Clock.Now()
	r.opens++
	r.mu.Unlock()
	return wch, func() { stop(); cancel() }, nil
}

// consume applies the watch's responses until it ends: closed, failed,
// compacted (the mirror must be re-listed) or presumed hung by the probe.
func (r *root) consume(wch clientv3.WatchChan) (delivered, compacted bool, err error) {
	for {
		select {
		case <-r.ctx.Done():
			return delivered, false, context.Cause(r.ctx)
		case <-r.reopen:
			return delivered, false, errHung
		case wr, ok := <-wch:
			switch {
			case !ok:
				return delivered, false, errStreamClosed
			case wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted):
				return delivered, true, fmt.Errorf("watchplane: watch %s: compacted at %d: %w", r.prefix, wr.CompactRevision, coord.ErrCompacted)
			case wr.Err() != nil:
				return delivered, false, fmt.Errorf("watchplane: watch %s: %w", r.prefix, etcderr.Classify(wr.Err()))
			case wr.Created:
				continue
			}
			if err := r.p.checkCluster(wr.Header); err != nil {
				return delivered, false, fmt.Errorf("watchplane: watch %s: %w", r.prefix, err)
			}
			delivered = true
			r.apply(&wr)
		}
	}
}
