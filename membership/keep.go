package membership

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// A registration's own loop keeps its key: it follows the key through the
// session's watch plane while the key is there (hold), and puts it again when it
// is lost (reregister). The session's loop keeps the lease; the two meet at three
// points only: the loop asks the session for its live lease (Session.lease, with a
// channel closed when a new one is granted), tells it a put found the lease gone
// (Session.reportLost), and is told of a new lease or a confirmation change
// (Registration.notify).

// run keeps the key registered until stopLoop: watch it while it is there,
// put it again when it is lost.
func (r *Registration) run() {
	defer close(r.done)
	for {
		r.mu.Lock()
		g := r.g
		r.mu.Unlock()
		var ok bool
		if g == nil {
			ok = r.reregister()
		} else {
			ok = r.hold(g)
		}
		if !ok {
			return
		}
	}
}

// reregister puts the key again after a loss, waiting a full-jitter backoff
// before each attempt (the attempt count restarts only after the key stayed
// registered for a TTL, so two processes fighting over one instance name slow
// down to the backoff cap), under the session's live lease. It serves Update
// requests meanwhile (they are kept, not written). It returns false when the
// registration stops.
func (r *Registration) reregister() bool {
	clk := r.s.cfg.Clock
	for {
		t := clk.NewTimer(r.s.cfg.Backoff.Delay(r.attempt))
		ok := r.idle(nil, t.C())
		t.Stop()
		if !ok {
			return false
		}
		r.attempt++
		g, ready, ok := r.s.lease()
		for ok && g == nil {
			if !r.idle(ready, nil) {
				return false
			}
			g, ready, ok = r.s.lease()
		}
		if !ok {
			return false
		}
		err := r.put(r.ctx, g)
		if err == nil {
			r.mu.Lock()
			took := clk.Now().Sub(r.lostAt)
			r.mu.Unlock()
			r.s.in.recovered(r.svc, took)
			r.s.cfg.Logger.Info("membership: re-registered", "key", r.inst.key, "lease_id", leaseHex(g.id),
				"after", took, "attempts", r.attempt)
			return true
		}
		if r.ctx.Err() != nil {
			return false
		}
		if isLeaseGone(err) {
			r.s.reportLost(g.id)
		}
		r.s.cfg.Logger.Warn("membership: re-registration failed", "key", r.inst.key, "attempt", r.attempt, "err", err)
		reconnect(r.s.cli)
	}
}

// idle blocks until wake is closed or t fires (either may be nil), serving
// Update requests as "not registered". It returns false when the registration
// stops.
func (r *Registration) idle(wake <-chan struct{}, t <-chan time.Time) bool {
	for {
		select {
		case <-r.stopc:
			return false
		case <-wake:
			return true
		case <-t:
			return true
		case req := <-r.reqs:
			r.store(req)
			req.reply <- fmt.Errorf("membership: update %s: %w (kept for the re-registration)", r.inst.key, ErrNotRegistered)
		}
	}
}

func (r *Registration) store(req *updateReq) {
	r.mu.Lock()
	r.value = req.value
	r.notifyLocked()
	r.mu.Unlock()
}

// put writes the key under g (one Put; the previous value tells the create
// revision) and records it as registered.
func (r *Registration) put(ctx context.Context, g *grant) error {
	r.mu.Lock()
	v := r.value
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.s.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.s.kv.Put(ctx, r.inst.key, v, clientv3.WithLease(g.id), clientv3.WithPrevKV())
	if err != nil {
		return err
	}
	create := resp.Header.Revision
	if p := resp.PrevKv; p != nil {
		create = p.CreateRevision
		if p.Lease != int64(g.id) {
			r.s.cfg.Logger.Info("membership: replaced an existing key of the instance (a previous incarnation, or another process with this instance name)",
				"key", r.inst.key, "their_lease_id", leaseHex(clientv3.LeaseID(p.Lease)), "lease_id", leaseHex(g.id))
		}
	}
	now := r.s.cfg.Clock.Now()
	r.mu.Lock()
	r.g, r.createRev, r.modRev = g, create, resp.Header.Revision
	r.stableSince = now
	r.st.Registrations++
	r.notifyLocked()
	r.mu.Unlock()
	return nil
}

// deleteUnknown removes the key after a first put of unknown outcome, if it is
// attached to g (so it can only be that put's).
func (r *Registration) deleteUnknown(ctx context.Context, g *grant) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.s.cfg.RequestTimeout)
	defer cancel()
	_, _ = r.s.kv.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(r.inst.key), "=", g.id)).
		Then(clientv3.OpDelete(r.inst.key)).Commit()
}

// lose records a loss and counts it.
func (r *Registration) lose(reason coord.LossReason, cause error) {
	now := r.s.cfg.Clock.Now()
	r.mu.Lock()
	if now.Sub(r.stableSince) >= r.s.cfg.TTL {
		r.attempt = 0 // it was stable: an isolated loss re-puts at once
	}
	r.g = nil
	r.lostAt = now
	r.st.Losses++
	r.st.LastLoss = Loss{Reason: reason, Err: cause, At: now}
	r.notifyLocked()
	r.mu.Unlock()
	r.s.in.lost(r.svc, reason)
	r.s.cfg.Logger.Warn("membership: registration lost; re-registering", "key", r.inst.key,
		"reason", string(reason), "err", cause)
}

// hold keeps the key while it is registered under g, following it through the
// session's watch plane (one upstream watch for every key of the tenant's
// members in the process). It returns true after a loss (recorded) and false
// when the registration stops. The subscription starts at the revision after
// the last put; a resync (the start, or a compaction) checks the key's state.
func (r *Registration) hold(g *grant) bool {
	r.mu.Lock()
	from := r.modRev + 1
	r.mu.Unlock()
	sub, err := r.s.plane.Subscribe(watchplane.Spec{Key: r.inst.key, From: from,
		RequestTimeout: r.s.cfg.RequestTimeout, Backoff: r.s.cfg.Backoff})
	var ready <-chan struct{}
	if err != nil {
		// The client is closed, or the tenant's watch quota is spent: the key
		// is still kept alive, a loss is seen at the next put or keepalive.
		r.s.cfg.Logger.Warn("membership: cannot follow the instance's key", "key", r.inst.key, "err", err)
	} else {
		defer sub.Close()
		ready = sub.Ready()
	}
	for {
		select {
		case <-r.stopc:
			return false
		case <-g.lost:
			r.lose(coord.LossSessionExpired, fmt.Errorf("lease %s: %w", leaseHex(g.id), rpctypes.ErrLeaseNotFound))
			return true
		case req := <-r.reqs:
			if reason, cause := r.update(g, req); reason != "" {
				r.lose(reason, cause)
				return true
			}
		case <-ready:
			for {
				u, ok := sub.Take()
				if !ok {
					break
				}
				if reason, cause := r.follow(g, u); reason != "" {
					r.lose(reason, cause)
					return true
				}
			}
		}
	}
}

// follow reads one update of the own-key subscription: a put of our own is
// nothing, anything else (a delete, someone else's put, a resync showing the
// key gone or rewritten) is a loss.
func (r *Registration) follow(g *grant, u watchplane.Update) (coord.LossReason, error) {
	if u.Resync {
		r.mu.Lock()
		create, mod := r.createRev, r.modRev
		r.mu.Unlock()
		switch {
		case len(u.KVs) == 0:
			return coord.LossKeyDeleted, fmt.Errorf("key gone at revision %d", u.Revision)
		case u.KVs[0].CreateRevision != create || u.KVs[0].ModRevision != mod || u.KVs[0].Lease != int64(g.id):
			return LossKeyOverwritten, fmt.Errorf("key rewritten at revision %d (lease %s)", u.KVs[0].ModRevision,
				leaseHex(clientv3.LeaseID(u.KVs[0].Lease)))
		}
		return "", nil
	}
	for _, ev := range u.Events {
		if reason, cause := r.classify(ev); reason != "" {
			return reason, cause
		}
	}
	return "", nil
}

// classify reads one event of the own-key watch: a put of our own is nothing,
// anything else is a loss.
func (r *Registration) classify(ev *clientv3.Event) (coord.LossReason, error) {
	if ev.Type == mvccpb.DELETE {
		return coord.LossKeyDeleted, fmt.Errorf("key deleted at revision %d", ev.Kv.ModRevision)
	}
	r.mu.Lock()
	ours := ev.Kv.ModRevision == r.modRev
	r.mu.Unlock()
	if ours {
		return "", nil
	}
	return LossKeyOverwritten, fmt.Errorf("key overwritten at revision %d (lease %s)", ev.Kv.ModRevision, leaseHex(clientv3.LeaseID(ev.Kv.Lease)))
}

// update applies an Update request while the key is registered under g: one
// put, guarded by the key's create revision and lease. It returns a loss
// reason when the guard shows the key is no longer ours.
func (r *Registration) update(g *grant, req *updateReq) (coord.LossReason, error) {
	r.mu.Lock()
	create := r.createRev
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(req.ctx, r.s.cfg.RequestTimeout)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	resp, err := r.s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(r.inst.key), "=", create),
			clientv3.Compare(clientv3.LeaseValue(r.inst.key), "=", g.id)).
		Then(clientv3.OpPut(r.inst.key, req.value, clientv3.WithLease(g.id))).
		Else(clientv3.OpGet(r.inst.key)).
		Commit()
	switch {
	case errors.Is(err, coord.ErrQuotaExceeded):
		req.reply <- fmt.Errorf("membership: update %s: %w", r.inst.key, err)
		return "", nil
	case err != nil:
		r.store(req)
		if isLeaseGone(err) {
			r.s.reportLost(g.id)
		}
		req.reply <- fmt.Errorf("membership: update %s: %w", r.inst.key, etcderr.Classify(err))
		return "", nil
	}
	r.store(req)
	if !resp.Succeeded {
		req.reply <- fmt.Errorf("membership: update %s: %w (kept for the re-registration)", r.inst.key, ErrNotRegistered)
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return coord.LossKeyDeleted, fmt.Errorf("key gone at revision %d (found by Update)", resp.Header.Revision)
		}
		return LossKeyOverwritten, fmt.Errorf("key rewritten at revision %d (lease %s, found by Update)", kvs[0].ModRevision,
			leaseHex(clientv3.LeaseID(kvs[0].Lease)))
	}
	r.mu.Lock()
	r.modRev = resp.Header.Revision
	r.mu.Unlock()
	req.reply <- nil
	return "", nil
}
