package ownership

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/internal/watchplane"
	"github.com/coordkit/coordkit/membership"
)

// run is the member's loop: it follows the member keys, the target key and the
// partition keys through the client's watch plane (one upstream etcd watch per
// tenant kind for the whole process: members, ownership and elections) and,
// after any change of the members or the target (and after any resync), reads
// both at one revision, recomputes the target (writing it only if it differs:
// nothing in steady state) and reconciles the partitions this member holds with
// the target. It ends when the member stops or its session loses authority.
func (m *Member) run(rev int64) {
	defer close(m.loopDone)
	clk := coord.SystemClock()
	backoff := coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second}
	retry := clk.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	attempt := 0
	k := m.g.keys
	members, mok := m.subscribe(watchplane.Spec{Key: k.memberPrefix(), Prefix: true, From: rev + 1, Backoff: backoff})
	target, tok := m.subscribe(watchplane.Spec{Key: k.target, Prefix: true, From: rev + 1, Backoff: backoff})
	tkvs := map[string]*mvccpb.KeyValue{} // the target's keys (head and chunks) as followed
	partitions, pok := m.subscribe(watchplane.Spec{Key: k.partitions, Prefix: true, From: rev + 1, Backoff: backoff})
	if !mok || !tok || !pok {
		m.stop()
		return
	}
	defer members.Close()
	defer target.Close()
	defer partitions.Close()
	if !m.evaluate() {
		retry.Reset(backoff.Delay(attempt))
		attempt++
	}
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.s.Done():
			m.log.Warn("ownership: session lost; every partition is revoked", "err", m.s.Err())
			m.stop()
			return
		case <-members.Done():
			m.log.Warn("ownership: the etcd client was closed; every partition is revoked")
			m.stop()
			return
		case <-members.Ready():
			if !drain(members, nil) {
				continue
			}
		case <-target.Ready():
			// Another member's target: reconcile with it. Recompute only when
			// it is gone or unreadable (or a resync): a target written from the
			// same member keys is the one we would write.
			recompute := false
			drain(target, func(u watchplane.Update) {
				if u.Resync {
					recompute = true
					clear(tkvs)
					for _, kv := range u.KVs {
						tkvs[string(kv.Key)] = kv
					}
				}
				for _, ev := range u.Events {
					if ev.Type == clientv3.EventTypeDelete {
						delete(tkvs, string(ev.Kv.Key))
					} else {
						tkvs[string(ev.Kv.Key)] = ev.Kv
					}
				}
			})
			if !m.seeTarget(slices.Collect(maps.Values(tkvs))) {
				recompute = true
			}
			if !recompute {
				continue
			}
		case <-partitions.Ready():
			// Puts of partition keys: this member's key queued, so the slot
			// lets the next acquisition queue. No evaluation: the assignment
			// does not depend on them.
			drain(partitions, func(u watchplane.Update) {
				for _, kv := range u.KVs {
					m.seePartitionKey(string(kv.Key))
				}
				for _, ev := range u.Events {
					if ev.Type == clientv3.EventTypePut {
						m.seePartitionKey(string(ev.Kv.Key))
					}
				}
			})
			continue
		case <-retry.C():
		}
		if m.ctx.Err() != nil {
			return
		}
		if !m.evaluate() {
			retry.Reset(backoff.Delay(attempt))
			attempt++
		} else {
			attempt = 0
		}
	}
}

// subscribe starts one of the loop's subscriptions on the group's watch plane.
func (m *Member) subscribe(spec watchplane.Spec) (*watchplane.Sub, bool) {
	sub, err := m.g.plane.Subscribe(spec)
	if err != nil {
		m.log.Error("ownership: cannot follow the group's keys; stopping the member", "key", spec.Key, "err", err)
		return nil, false
	}
	return sub, true
}

// drain takes every update waiting on sub, passing each to fn (if not nil),
// and reports whether there was any.
func drain(sub *watchplane.Sub, fn func(watchplane.Update)) bool {
	any := false
	for {
		u, ok := sub.Take()
		if !ok {
			return any
		}
		any = true
		if fn != nil {
			fn(u)
		}
	}
}

// seePartitionKey tells the slot of a partition key of this member that its
// key is in etcd.
func (m *Member) seePartitionKey(key string) {
	if p, member, ok := m.g.keys.parsePartitionKey(key, m.g.cfg.Partitions); ok && member == m.id {
		m.queuedKey(p)
	}
}

// readState reads the member ids and the target at one revision (one
// linearizable transaction) and applies the target.
func (m *Member) readState(ctx context.Context) ([]string, target, error) {
	k := m.g.keys
	resp, err := m.g.cli.Txn(ctx).Then(clientv3.OpGet(k.memberPrefix(), clientv3.WithPrefix()), clientv3.OpGet(k.target, clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, target{}, etcderr.Classify(err)
	}
	var ids []string
	prefix := k.memberPrefix()
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		if id := string(kv.Key[len(prefix):]); !strings.Contains(id, "/") {
			if _, _, ok := membership.DecodeRecord(kv.Value); ok {
				ids = append(ids, id)
			}
		}
	}
	m.seeTarget(resp.Responses[1].GetResponseRange().Kvs)
	m.mu.Lock()
	t := m.target
	m.mu.Unlock()
	return ids, t, nil
}

// seeTarget records the target read from etcd (its keys: the head and any
// chunks), unless an equal or newer one is known already (our own write's watch
// event comes after its response). It reports false when the target is gone or
// malformed: it must be rewritten.
func (m *Member) seeTarget(kvs []*mvccpb.KeyValue) bool {
	t, rev, found, err := readTarget(kvs, m.g.keys.target)
	return m.applyTarget(t, rev, found, err)
}

// applyTarget is seeTarget for a target already decoded.
func (m *Member) applyTarget(t target, rev int64, found bool, err error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if found && rev <= m.target.Revision {
		return true
	}
	ok := true
	switch {
	case !found:
		m.target, ok = target{}, false
	case err != nil:
		m.log.Warn("ownership: malformed target; it will be rewritten", "err", err)
		m.target, ok = target{Revision: rev}, false
	default:
		m.target = t
	}
	m.reconcileLocked()
	return ok
}

// evaluate reconciles the partitions with the target and, when the target
// computed from the current members differs, writes it. Members and target are
// read fresh, at one revision: a member never writes a target from an older
// member set than the target it replaces was computed from (so a member whose
// watch lags cannot take a joiner's partitions back). It reports false when a
// read or write failed and should be retried.
func (m *Member) evaluate() bool {
	for range 5 {
		m.mu.Lock()
		m.reconcileLocked()
		skip := m.stopped || m.leaving || m.s.Err() != nil
		m.mu.Unlock()
		if skip {
			return true
		}
		ctx, cancel := context.WithTimeout(m.ctx, m.s.TTL()/3)
		members, prev, err := m.readState(ctx)
		if err != nil {
			cancel()
			if m.ctx.Err() == nil {
				m.log.Warn("ownership: state read failed; retrying", "err", err)
			}
			return false
		}
		if prev.Partitions != 0 && prev.Partitions != m.g.cfg.Partitions {
			cancel()
			m.log.Error("ownership: the group's target has another partition count; not rewriting it",
				"target_partitions", prev.Partitions, "partitions", m.g.cfg.Partitions)
			return true
		}
		owners := prev.Owners
		if owners == nil {
			owners = make([]string, m.g.cfg.Partitions)
		}
		next := assign(owners, members)
		if slices.Equal(next, prev.Owners) {
			cancel()
			return true
		}
		done, err := m.writeTarget(ctx, prev, next)
		cancel()
		if err != nil {
			if m.ctx.Err() == nil {
				m.log.Warn("ownership: target write failed; retrying", "err", err)
			}
			return false
		}
		if done {
			return true
		}
		// Someone else wrote first: read again.
	}
	return true
}

// writeTarget writes next if the target key is still at prev's revision (one
// key, or a head and its chunks past the value quota: one transaction), paced
// by the tenant's write quota. It reports whether it wrote; on a lost race it
// applies the winner's target.
func (m *Member) writeTarget(ctx context.Context, prev target, next []string) (bool, error) {
	k := m.g.keys
	ops, err := targetOps(k.target, next)
	if err != nil {
		return false, err
	}
	if err := m.paceWrites(ctx, len(ops)); err != nil {
		return false, err
	}
	resp, err := m.g.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k.target), "=", prev.Revision)).
		Then(ops...).
		Else(clientv3.OpGet(k.target, clientv3.WithPrefix())).Commit()
	if err != nil {
		return false, etcderr.Classify(err)
	}
	if !resp.Succeeded {
		m.seeTarget(resp.Responses[0].GetResponseRange().Kvs)
		return false, nil
	}
	m.in.wroteTarget()
	moved := len(next)
	if prev.Owners != nil {
		moved = moves(prev.Owners, next)
	}
	m.log.Info("ownership: target written", "revision", resp.Header.Revision, "moves", moved, "keys", len(ops))
	m.applyTarget(target{Partitions: len(next), Owners: next, Revision: resp.Header.Revision}, resp.Header.Revision, true, nil)
	return true, nil
}
