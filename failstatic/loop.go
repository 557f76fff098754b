package failstatic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
)

var (
	errWatchClosed = errors.New("failstatic: watch channel closed")
	errWatchHung   = errors.New("failstatic: watch presumed hung (cache unconfirmed for ResetAfter)")
)

// run is the list/watch loop: watch from rev+1, and after the watch ends for any
// reason wait a full-jitter backoff, check etcd answers, and resume from rev+1 —
// or re-list first after a compaction. It returns only when ctx ends.
func (c *Cache[T]) run(ctx context.Context) {
	attempt := 0
	listed := !c.needList // New just listed: watch at once, no readiness check
	for ctx.Err() == nil {
		var err error
		switch {
		case listed:
			listed = false
		case c.needList:
			if err = c.list(ctx); errors.Is(err, ErrRejected) {
				err = nil // the working map is complete; watch for a fix
			}
		default:
			err = c.probe(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.setErr(err)
			c.log.Warn("etcd not reachable; serving last good snapshot", "attempt", attempt, "err", err)
			_ = c.cfg.Backoff.Wait(ctx, c.clock, attempt)
			attempt++
			continue
		}
		delivered, compacted, werr := c.watch(ctx)
		c.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		if delivered {
			attempt = 0
		}
		c.reconnects.Add(1)
		c.tel.reconnects.Add(ctx, 1, c.tel.attrs)
		if compacted {
			c.needList = true
			c.relists.Add(1)
			c.tel.relists.Add(ctx, 1, c.tel.attrs)
		}
		c.setErr(werr)
		c.log.Info("watch ended; resuming", "revision", c.rev, "relist", compacted, "attempt", attempt, "err", werr)
		_ = c.cfg.Backoff.Wait(ctx, c.clock, attempt)
		attempt++
	}
}

// watch watches from c.rev+1 until the watch fails, is compacted, closes or is
// presumed hung. delivered reports whether it delivered anything.
func (c *Cache[T]) watch(ctx context.Context) (delivered, compacted bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(c.rev + 1), clientv3.WithProgressNotify()}
	if c.isPrefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	// clientv3's Watch blocks until the stream is open — forever if etcd went away
	// just now. Bound it like any request: on timeout the channel comes back
	// closed and the loop backs off.
	watchdog := time.AfterFunc(c.cfg.RequestTimeout, cancel)
	wch := c.client.Watch(wctx, c.watched, opts...)
	if !watchdog.Stop() {
		return false, false, fmt.Errorf("failstatic: opening watch: %w", context.DeadlineExceeded)
	}
	started := c.clock.Now()
	c.watchOff.Store(int64(started.Sub(c.base)))
	check := c.clock.NewTimer(c.cfg.ProbeInterval)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return delivered, false, context.Cause(ctx)
		case <-check.C():
			if c.Staleness() > c.cfg.ResetAfter && c.clock.Now().Sub(started) > c.cfg.ResetAfter {
				return delivered, false, errWatchHung
			}
			check.Reset(c.cfg.ProbeInterval)
		case wr, ok := <-wch:
			if !ok {
				// Never "no change": the stream is gone, resume from c.rev.
				return delivered, false, errWatchClosed
			}
			if wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted) {
				return delivered, true, fmt.Errorf("watch from revision %d: compacted at %d: %w: %w", c.rev+1, wr.CompactRevision, coord.ErrCompacted, rpctypes.ErrCompacted)
			}
			if err := wr.Err(); err != nil {
				return delivered, false, etcderr.Classify(err)
			}
			if wr.Created {
				continue
			}
			delivered = true
			c.connected.Store(true)
			if wr.IsProgressNotify() {
				// Every event up to the header revision has been sent.
				c.rev = max(c.rev, wr.Header.Revision)
				c.publishObserved()
				continue
			}
			for _, ev := range wr.Events {
				k := string(ev.Kv.Key)
				switch ev.Type {
				case mvccpb.PUT:
					c.work[k] = KV{Key: k, Value: ev.Kv.Value, ModRevision: ev.Kv.ModRevision}
				case mvccpb.DELETE:
					delete(c.work, k)
				}
				c.dirty[k] = ev.Kv.ModRevision
				c.rev = max(c.rev, ev.Kv.ModRevision)
			}
			c.publishObserved()
			_ = c.offer(ctx, SourceLive)
		}
	}
}

// list reads the whole key or prefix at one (linearizable) revision, replaces
// the working map with it and offers the result for adoption.
func (c *Cache[T]) list(ctx context.Context) error {
	sent := c.clock.Now()
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	var opts []clientv3.OpOption
	if c.isPrefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	resp, err := c.client.Get(clientv3.WithRequireLeader(rctx), c.watched, opts...)
	if err != nil {
		return fmt.Errorf("failstatic: list %q: %w", c.watched, etcderr.Classify(err))
	}
	rev := resp.Header.Revision
	c.needList = false
	for k := range c.work {
		c.dirty[k] = rev
	}
	c.work = make(map[string]KV, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		c.work[k] = KV{Key: k, Value: kv.Value, ModRevision: kv.ModRevision}
		c.dirty[k] = kv.ModRevision
	}
	c.rev = rev
	c.publishObserved()
	c.confirm(sent)
	return c.offer(ctx, SourceLive)
}

func (c *Cache[T]) publishObserved() {
	o := &observation{rev: c.rev, count: int64(len(c.work))}
	for _, kv := range c.work {
		o.maxMod = max(o.maxMod, kv.ModRevision)
	}
	c.observed.Store(o)
}

// offer decodes and validates the working map and adopts it, or counts and logs
// the rejection and keeps the last good snapshot.
func (c *Cache[T]) offer(ctx context.Context, src Source) error {
	kvs := make([]KV, 0, len(c.work))
	for _, kv := range c.work {
		kvs = append(kvs, kv)
	}
	slices.SortFunc(kvs, func(a, b KV) int { return cmp.Compare(a.Key, b.Key) })
	val, err := c.cfg.Decode(kvs)
	stage := "decode"
	if err == nil {
		stage = "validate"
		err = c.cfg.Validate(val)
	}
	if err != nil {
		rej := &RejectedError{Revision: c.rev, Stage: stage, Err: err}
		c.rejected.Add(1)
		c.tel.rejected.Add(ctx, 1, c.tel.attrs)
		c.mu.Lock()
		c.lastRej = rej
		c.mu.Unlock()
		c.log.Error("snapshot rejected; keeping last good snapshot", "revision", c.rev, "stage", stage, "err", err)
		return rej
	}
	c.adopt(&state[T]{value: val, rev: c.rev, source: src, kvs: maps.Clone(c.work)})
	return nil
}

// adopt publishes st and tells subscribers and the persister.
func (c *Cache[T]) adopt(st *state[T]) {
	for _, kv := range st.kvs {
		st.maxMod = max(st.maxMod, kv.ModRevision)
	}
	old := c.cur.Load()
	var changes []Change
	for k, rev := range c.dirty {
		nw, inNew := st.kvs[k]
		var ov KV
		inOld := false
		if old != nil {
			ov, inOld = old.kvs[k]
		}
		switch {
		case inNew && (!inOld || ov.ModRevision != nw.ModRevision):
			changes = append(changes, Change{Key: k, Value: nw.Value, ModRevision: nw.ModRevision})
		case !inNew && inOld:
			changes = append(changes, Change{Key: k, ModRevision: rev, Deleted: true})
		}
	}
	if old != nil && old.source == SourceDisk {
		// The disk snapshot's keys were never marked dirty: diff them all.
		for k := range old.kvs {
			_, inNew := st.kvs[k]
			if _, seen := c.dirty[k]; !inNew && !seen {
				changes = append(changes, Change{Key: k, ModRevision: st.rev, Deleted: true})
			}
		}
	}
	clear(c.dirty)
	slices.SortFunc(changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.ModRevision, b.ModRevision), cmp.Compare(a.Key, b.Key))
	})
	c.cur.Store(st)
	c.mu.Lock()
	c.lastRej = nil
	c.mu.Unlock()
	if old == nil || len(changes) > 0 || old.source != st.source {
		c.subs.publish(Snapshot[T]{Value: st.value, Revision: st.rev, Source: st.source}, changes)
	}
	c.kickPersist()
}
