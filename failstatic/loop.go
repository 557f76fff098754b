package failstatic

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/coordkit/coordkit/internal/watchplane"
)

// run applies the subscription's updates until ctx ends — a resync replaces the
// working map, events change it, and each batch is offered for adoption — and
// confirms the cache whenever the watch plane confirms its root current. The
// plane resumes, re-lists, probes and paces reconnects; a cache whose plane has
// closed (its client was closed) keeps serving its last snapshot.
func (c *Cache[T]) run(ctx context.Context) {
	_, confirmed := c.sub.Confirmation()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.sub.Done():
			return
		case <-confirmed:
			var at time.Time
			at, confirmed = c.sub.Confirmation()
			c.confirm(at)
		case <-c.sub.Ready():
			if c.drain() {
				_ = c.offer(ctx, SourceLive)
			}
		}
	}
}

// drain applies every update waiting on the subscription and reports whether
// there was any.
func (c *Cache[T]) drain() bool {
	any := false
	for {
		u, ok := c.sub.Take()
		if !ok {
			return any
		}
		any = true
		c.apply(u)
	}
}

// apply applies one update to the working map, marking what it touched.
func (c *Cache[T]) apply(u watchplane.Update) {
	if u.Resync {
		if c.rev > 0 {
			c.relists.Add(1)
			c.tel.relists.Add(context.Background(), 1, c.tel.attrs)
		}
		for k := range c.work {
			c.dirty[k] = u.Revision
		}
		c.work = make(map[string]KV, len(u.KVs))
		for _, kv := range u.KVs {
			k := string(kv.Key)
			c.work[k] = KV{Key: k, Value: kv.Value, ModRevision: kv.ModRevision}
			c.dirty[k] = kv.ModRevision
		}
	}
	for _, ev := range u.Events {
		k := string(ev.Kv.Key)
		switch ev.Type {
		case mvccpb.PUT:
			c.work[k] = KV{Key: k, Value: ev.Kv.Value, ModRevision: ev.Kv.ModRevision}
		case mvccpb.DELETE:
			delete(c.work, k)
		}
		c.dirty[k] = ev.Kv.ModRevision
	}
	c.rev = max(c.rev, u.Revision)
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
		c.tel.rejected.Add(ctx, 1, c.tel.attrs) // before Status shows it: a reader of both sees the metric
		c.rejected.Add(1)
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
