package ownership

import (
	"context"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/etcderr"
	"github.com/coordkit/coordkit/membership"
)

// run is the member's loop: it watches the member keys and the target key and,
// after any change (and after any watch restart), reads both at one revision,
// recomputes the target (writing it only if it differs: nothing in steady
// state) and reconciles the partitions this member holds with the target. It
// ends when the member stops or its session loses authority.
func (m *Member) run(rev int64) {
	defer close(m.loopDone)
	backoff := coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	attempt := 0
	memberRev, targetRev, partRev := rev, rev, rev
	mch := m.g.cli.Watch(m.ctx, m.g.keys.memberPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	tch := m.g.cli.Watch(m.ctx, m.g.keys.target, clientv3.WithRev(rev+1))
	partitions := func(from int64) clientv3.WatchChan {
		return m.g.cli.Watch(m.ctx, m.g.keys.partitions, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithFilterDelete())
	}
	pch := partitions(rev + 1)
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
		case wr, ok := <-mch:
			if from, restart := progress(wr, ok, &memberRev); restart {
				mch = m.g.cli.Watch(m.ctx, m.g.keys.memberPrefix(), clientv3.WithPrefix(), clientv3.WithRev(from))
			}
		case wr, ok := <-tch:
			// Another member's target: reconcile with it. Recompute only when
			// it is gone or unreadable (or the watch restarted): a target
			// written from the same member keys is the one we would write.
			recompute := false
			for _, ev := range wr.Events {
				if !m.seeTarget(ev.Kv.Value, ev.Kv.ModRevision, ev.Type == clientv3.EventTypeDelete) {
					recompute = true
				}
			}
			if from, restart := progress(wr, ok, &targetRev); restart {
				tch = m.g.cli.Watch(m.ctx, m.g.keys.target, clientv3.WithRev(from))
				recompute = true
			}
			if !recompute {
				continue
			}
		case wr, ok := <-pch:
			// Puts of partition keys: this member's key queued, so the slot
			// lets the next acquisition queue. No evaluation: the assignment
			// does not depend on them.
			for _, ev := range wr.Events {
				if p, member, ok := m.g.keys.parsePartitionKey(string(ev.Kv.Key), m.g.cfg.Partitions); ok && member == m.id {
					m.queuedKey(p)
				}
			}
			if from, restart := progress(wr, ok, &partRev); restart {
				pch = partitions(from)
			}
			continue
		case <-retry.C:
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

// progress records a watch response's revision in *rev and reports whether the
// watch ended (or failed) and must be opened again, from the returned revision:
// the next one after *rev, or after a compaction the oldest one kept (evaluate
// reads the whole state afterwards, so skipped events lose nothing).
func progress(wr clientv3.WatchResponse, ok bool, rev *int64) (int64, bool) {
	if ok && wr.Err() == nil {
		*rev = max(*rev, wr.Header.Revision)
		return 0, false
	}
	if ok && wr.CompactRevision > *rev {
		return wr.CompactRevision, true
	}
	return *rev + 1, true
}

// readState reads the member ids and the target at one revision (one
// linearizable transaction) and applies the target.
func (m *Member) readState(ctx context.Context) ([]string, target, error) {
	k := m.g.keys
	resp, err := m.g.cli.Txn(ctx).Then(clientv3.OpGet(k.memberPrefix(), clientv3.WithPrefix()), clientv3.OpGet(k.target)).Commit()
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
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		m.seeTarget(kvs[0].Value, kvs[0].ModRevision, false)
	} else {
		m.seeTarget(nil, 0, true)
	}
	m.mu.Lock()
	t := m.target
	m.mu.Unlock()
	return ids, t, nil
}

// seeTarget records a target read from etcd, unless an equal or newer one is
// known already (our own write's watch event comes after its response). It
// reports false when the target is gone or malformed: it must be rewritten.
func (m *Member) seeTarget(value []byte, modRev int64, deleted bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !deleted && modRev <= m.target.Revision {
		return true
	}
	ok := true
	switch t, err := decodeTarget(value, modRev); {
	case deleted:
		m.target, ok = target{}, false
	case err != nil:
		m.log.Warn("ownership: malformed target; it will be rewritten", "err", err)
		m.target, ok = target{Revision: modRev}, false
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

// writeTarget writes next if the target key is still at prev's revision. It
// reports whether it wrote; on a lost race it applies the winner's target.
func (m *Member) writeTarget(ctx context.Context, prev target, next []string) (bool, error) {
	b, err := encodeTarget(next)
	if err != nil {
		return false, err
	}
	resp, err := m.g.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(m.g.keys.target), "=", prev.Revision)).
		Then(clientv3.OpPut(m.g.keys.target, string(b))).
		Else(clientv3.OpGet(m.g.keys.target)).Commit()
	if err != nil {
		return false, etcderr.Classify(err)
	}
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			m.seeTarget(kvs[0].Value, kvs[0].ModRevision, false)
		} else {
			m.seeTarget(nil, 0, true)
		}
		return false, nil
	}
	m.in.wroteTarget()
	moved := len(next)
	if prev.Owners != nil {
		moved = moves(prev.Owners, next)
	}
	m.log.Info("ownership: target written", "revision", resp.Header.Revision, "moves", moved)
	m.seeTarget(b, resp.Header.Revision, false)
	return true, nil
}
